// The inverse of the message headers agent/Prompt.ts writes: a prompt as people read it (live
// view, attach, scripted books). Pure; here so that lower folders (provider/scripted) can use it.
/**
 * A prompt as people read it: each message header `formatMessage` wrote (`Message from USER
 * (message <id>, reply expected):`) shortened to its sender (`USER:`, `bob (reply):`).
 */
export const forPeople = (prompt: string): string =>
  prompt
    .replace(/(^|\n)Message from (\S+) \(message [0-9a-f-]+, reply expected\):\n/g, "$1$2: ")
    .replace(/(^|\n)Message from (\S+) \(message [0-9a-f-]+\):\n/g, "$1$2: ")
    .replace(/(^|\n)Broadcast from (\S+) \(message [0-9a-f-]+\):\n/g, "$1$2 (broadcast): ")
    .replace(/(^|\n)Late reply from (\S+) \(to message [0-9a-f?-]+, after it timed out\): /g, "$1$2 (late reply): ")
    .replace(/(^|\n)Reply from (\S+) \(to message [0-9a-f?-]+\): /g, "$1$2 (reply): ")

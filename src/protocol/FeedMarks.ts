// Marks in a feed item's text (protocol/admin/events.ts FeedItem), written by the daemon
// (daemon/FeedLines.ts) and read back by the CLI (cli/Live.ts). A module of its own so that the
// client bundle, which reads them, evaluates no daemon code.

/** What a message line says instead of repeating the turn text just shown. */
export const SAME_AS_TURN = "↑ (the turn's text above)"

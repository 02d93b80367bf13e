// One attack of the `security` chaos experiment (`npm run chaos -- --only security`): it replays a
// defect of the threat model (docs/reliability.md "Threat model") against a real daemon and says
// whether the attack got through. The experiment fails when any attack succeeds.
// Each surface keeps its attacks in its own file beside this one (http, sandbox, forwarder, quota).

export interface AttackResult {
  /** true when the attack got past the defence (the experiment then fails) */
  readonly breached: boolean
  /** what was observed, for the report: status codes, bytes, counts */
  readonly detail: string
}

export interface Attack {
  /** the item of the threat model it replays, e.g. "22.1 token bypass" */
  readonly name: string
  /** needs the daemon to run as root (skipped, and said so, otherwise) */
  readonly rootOnly?: boolean
  readonly run: () => Promise<AttackResult>
}

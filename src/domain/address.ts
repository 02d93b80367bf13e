// A TCP listen address as the owner writes it (`--http`, `cluster.listen`): HOST:PORT with an
// IPv6 host in brackets.

export interface TcpAddress {
  readonly host: string
  readonly port: number
}

/** `127.0.0.1:8080`, `[::1]:8080`, `localhost:0`; undefined when it is none of these. */
export const parseAddress = (s: string): TcpAddress | undefined => {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(s.trim())
  if (m === null) return undefined
  const port = Number(m[3])
  return port > 65535 ? undefined : { host: m[1] ?? m[2]!, port }
}

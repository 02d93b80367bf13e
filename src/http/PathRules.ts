// The request-target rules every HTTP request passes before routing (docs/http.md "Paths"). The
// router (find-my-way, under @effect/platform's HttpRouter) cuts a path at `;`, decodes `%XX`,
// ignores case, duplicate and trailing slashes; a client, a proxy or the WHATWG URL parser each
// normalise differently again (`/v1/agents;/../../` is `/` to one and `/v1/agents` to the other).
// So a target that two readers could take for two different paths is refused with 400 before
// anything looks at it: only one spelling of each path gets through, the one the router and the
// authorisation (bound to the routed handler, src/http/Server.ts) agree on.
//
// Refused in the path (before `?`):
//   - anything but origin-form (`/…`): `*`, `http://host/…`
//   - bytes outside printable ASCII (controls, space, non-ASCII), `\`, `;`, `#`
//   - a malformed `%` escape, and escapes of separators or dots: `%2e` `%2f` `%5c` `%3b` `%25`
//     and every control byte (`%00`–`%1f`, `%7f`) — any case (`%23` `#` and `%3A` `:` are data:
//     node ids hold them)
//   - an empty segment (`//`), and `.` / `..` segments
// The query (after `?`) only needs printable ASCII without `#` (routing never reads it).
// One exception: `%2F` inside the `{id}` segment of `/swarm/agents/{id}[/…]`. A swarm node id is a
// file path (`src/a.ts#function:f`); the router never decodes `%2F` in a path, it hands the segment
// to the handler as one parameter, which decodes it into a node id, never into a path to route.

/** A /swarm/agents/{id} route: its `{id}` segment may hold `%2F` (and only that segment). */
const nodeRoute = /^\/swarm\/agents\/([^/]+)(?:\/(?:chat|trigger|schedule|log|source))?\/?$/i

/** Escapes refused in a path: separators, dots, `%` itself (a second decoding), controls. */
const forbiddenEscape = (byte: number): boolean =>
  byte < 0x20 || byte === 0x7f || byte === 0x2e || byte === 0x2f || byte === 0x5c || byte === 0x3b || byte === 0x25

const isHex = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)

/** Printable ASCII (0x21–0x7e). */
const printable = (c: number): boolean => c >= 0x21 && c <= 0x7e

/**
 * Why a request-target is refused, or undefined when it is one unambiguous origin-form path. The
 * reason names the rule, never the input (error replies do not echo requests).
 */
export const refusal = (target: string): string | undefined => {
  if (target.length === 0 || target.charCodeAt(0) !== 0x2f) return "the request target must be a path starting with /"
  const q = target.indexOf("?")
  const path = q < 0 ? target : target.slice(0, q)
  const node = nodeRoute.exec(path)
  // Where `%2F` is data: [start, end) of the node id segment, or nothing.
  const dataFrom = node === null ? -1 : "/swarm/agents/".length
  const dataTo = node === null ? -1 : dataFrom + node[1]!.length
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i)
    if (!printable(c)) return "the path holds a byte outside printable ASCII"
    if (c === 0x5c) return "the path holds a backslash"
    if (c === 0x3b) return "the path holds a ';'"
    if (c === 0x23) return "the path holds a '#'"
    if (c === 0x25) {
      const h = path.charCodeAt(i + 1)
      const l = path.charCodeAt(i + 2)
      if (!isHex(h) || !isHex(l)) return "the path holds a malformed %-escape"
      const byte = parseInt(path.slice(i + 1, i + 3), 16)
      const slashInNodeId = byte === 0x2f && i >= dataFrom && i + 3 <= dataTo
      if (forbiddenEscape(byte) && !slashInNodeId) return "the path holds an encoded separator, dot, % or control byte"
      i += 2
    }
  }
  if (path !== "/") {
    const segments = path.slice(1).split("/")
    for (let i = 0; i < segments.length; i++) {
      const s = segments[i]!
      if (s === "." || s === "..") return "the path holds a '.' or '..' segment"
      // One trailing slash is an empty last segment; any other empty segment is `//`.
      if (s === "" && i < segments.length - 1) return "the path holds an empty segment (//)"
    }
  }
  if (q >= 0) {
    for (let i = q + 1; i < target.length; i++) {
      const c = target.charCodeAt(i)
      if (!printable(c) || c === 0x23) return "the query holds a byte outside printable ASCII or a '#'"
    }
  }
  return undefined
}

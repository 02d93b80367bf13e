// The dashboard's plumbing, shared by every view module: the bearer token, the REST helper, the
// DOM builder and the SSE reader. The token comes from the URL fragment (`substrat ui` prints it;
// the fragment never reaches a server) and stays in sessionStorage. The SSE feed is read with
// fetch — EventSource cannot send the bearer token — resuming with Last-Event-ID after a drop.

export const $ = (id) => document.getElementById(id)

const token = (() => {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash)
  if (m) {
    sessionStorage.setItem("substrat-token", decodeURIComponent(m[1]))
    history.replaceState(null, "", location.pathname)
  }
  return sessionStorage.getItem("substrat-token")
})()

export const authHeaders = (extra = {}) => (token ? { ...extra, authorization: "Bearer " + token } : extra)

export const api = async (method, path, body) => {
  const res = await fetch(path, {
    method,
    headers: authHeaders(body === undefined ? {} : { "content-type": "application/json" }),
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  const data = await res.json().catch(() => ({}))
  if (!res.ok) throw new Error((data.error && data.error.message) || res.status + " " + res.statusText)
  return data
}

export const el = (tag, props = {}, ...children) => {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v
    else if (k === "text") e.textContent = v
    else if (k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "tabindex") e.setAttribute(k, v)
    else e[k] = v
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c)
  return e
}

/**
 * Follow an SSE path; calls onEvent(name, data) per event, reconnecting with Last-Event-ID.
 * Returns a stop function.
 */
export const follow = (path, onEvent, onState) => {
  const ctrl = new AbortController()
  let lastId
  const run = async () => {
    while (!ctrl.signal.aborted) {
      try {
        const headers = authHeaders(lastId === undefined ? {} : { "last-event-id": lastId })
        const res = await fetch(path, { headers, signal: ctrl.signal })
        if (!res.ok || !res.body) throw new Error("HTTP " + res.status)
        onState("live")
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
        let buf = ""
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          buf += value
          let i
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i)
            buf = buf.slice(i + 2)
            let name = "message", data = "", id
            for (const line of block.split("\n")) {
              if (line.startsWith("id: ")) id = line.slice(4)
              else if (line.startsWith("event: ")) name = line.slice(7)
              else if (line.startsWith("data: ")) data += line.slice(6)
            }
            if (id !== undefined) lastId = id
            if (data !== "") onEvent(name, JSON.parse(data))
          }
        }
      } catch (e) {
        if (ctrl.signal.aborted) return
      }
      onState("down")
      await new Promise((r) => setTimeout(r, 1000))
    }
  }
  run()
  return () => ctrl.abort()
}


export const fmtCost = (c) => "$" + c.toFixed(c < 0.01 ? 4 : 2)
export const elapsed = (since) => {
  const s = Math.max(0, Math.round((Date.now() - since) / 1000))
  return s < 60 ? s + "s" : Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s"
}

export const short = (v) => {
  const s = typeof v === "string" ? v : JSON.stringify(v)
  return s.length > 300 ? s.slice(0, 299) + "…" : s
}


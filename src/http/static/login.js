// Trades the one-time code of `substrat ui` (in the fragment: never sent to the server, never in
// its logs) for the session cookie, then opens the dashboard.
const status = document.getElementById("status")
const m = /(?:^#|&)code=([^&]+)/.exec(location.hash)
history.replaceState(null, "", "/login")
if (m === null) {
  status.textContent = "No code in this URL: run `substrat ui` again."
} else {
  const res = await fetch("/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ code: decodeURIComponent(m[1]) })
  })
  if (res.ok) location.replace("/")
  else status.textContent = "This code is used or expired: run `substrat ui` again."
}

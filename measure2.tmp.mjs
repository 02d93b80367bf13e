import { chromium } from "playwright-core"
const [url] = process.argv.slice(2)
const b = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--headless", "--no-sandbox", "--disable-gpu"] })
const p = await b.newPage({ viewport: { width: 1280, height: 800 } })
await p.goto(url)
await p.locator("#conn.live").waitFor()
for (let i = 0; i < 3; i++) {
  console.log(await p.evaluate(async () => {
    const h = { authorization: "Bearer " + sessionStorage.getItem("substrat-token") }
    let t = performance.now(); const r = await fetch("/v1/agents?all=1", { headers: h }); const text = await r.text(); const net = performance.now() - t
    t = performance.now(); JSON.parse(text); const parse = performance.now() - t
    t = performance.now(); const r2 = await fetch("/swarm/agents?status=idle,busy,waiting,quarantined", { headers: h }); await r2.json(); const awake = performance.now() - t
    t = performance.now(); const r3 = await fetch("/v1/inbox", { headers: h }); await r3.json(); const inbox = performance.now() - t
    return { bytes: text.length, net: Math.round(net), parse: Math.round(parse), awake: Math.round(awake), inbox: Math.round(inbox) }
  }))
}
await b.close()

// Entry point of the MCP stdio server as a program of its own:
//   node --import tsx src/mcp/main.ts --socket <agent.sock>      (from source)
//   node dist/mcp-server.cjs --socket <agent.sock>              (bundled: see docs/tools.md)
// The provider CLIs spawn it once per turn, so it loads only src/mcp (see Command.ts).
import { main } from "./Command.js"

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`substrat mcp-server: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`)
    process.exit(1)
  }
)

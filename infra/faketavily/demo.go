package faketavily

// DemoDocuments are the pages `make dev` serves when no Tavily account is configured: enough for
// a demo search to find something, at example.com addresses so nobody mistakes them for the web.
var DemoDocuments = []Document{
	{
		URL:     "https://example.com/harness/async-tools",
		Title:   "Async tools in an agent harness",
		Content: "Slow tools run async: inside the same invocation while the model keeps working, or dispatched to an outside worker that completes them later. The harness re-drives the turn exactly once when every call of a sealed dispatch group has settled.",
	},
	{
		URL:     "https://example.com/harness/approvals",
		Title:   "Approving tool calls",
		Content: "Approvals: a tool with needsApproval holds its calls until the user approves or denies each one; the decision resumes the turn where it paused.",
	},
	{
		URL:     "https://example.com/harness/streaming",
		Title:   "Streaming agent turns",
		Content: "Agent turns stream as the AI SDK UI message stream over server-sent events, so a useChat front end works unchanged.",
	},
	{
		URL:     "https://example.com/garden/moles",
		Title:   "Moles in the garden",
		Content: "Moles dig tunnels under lawns looking for worms.",
	},
}

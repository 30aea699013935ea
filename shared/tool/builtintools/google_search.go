package builtintools

// googleSearch: Gemini's grounding with Google Search, a provider-defined tool. The model's
// provider runs the search and cites its sources, so the harness has no execute for it, and
// async or external dispatch cannot apply to it. Only models whose adapter runs it (google)
// may enable it.

import "github.com/agentharness/harness/shared/model"

var googleSearchSpec = Spec{ProviderTool: model.ProviderGoogleSearch}

package catalogue_test

import (
	"fmt"

	"github.com/agentharness/harness/shared/model/catalogue"
)

func ExampleLookup() {
	m, _ := catalogue.Lookup("anthropic", "claude-haiku-4-5")
	fmt.Printf("%s: %d tokens, $%.2f in and $%.2f out per million tokens\n", m.Label, m.ContextWindow, m.Pricing.InputPerMTok, m.Pricing.OutputPerMTok)
	// Output: Claude Haiku 4.5: 200000 tokens, $1.00 in and $5.00 out per million tokens
}

func ExampleDeployment_Reach() {
	reach := catalogue.Deployment{Keyed: []string{"openai"}}.Reach([]string{"anthropic"})
	for _, p := range reach.Providers() {
		fmt.Printf("%s available=%v key=%q\n", p.Provider, p.Available, p.KeySource)
	}
	// Output:
	// openai available=true key="operator"
	// anthropic available=true key="account"
	// google available=false key=""
	// bedrock available=false key=""
	// scripted available=true key="builtin"
}

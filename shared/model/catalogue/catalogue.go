// Package catalogue is the model catalogue: the models of each provider the harness curates,
// with their context windows, capabilities and prices per million tokens, and which of them a
// caller can reach (Reach). GET /models and the App Server's list_models answer from it; the
// cost of a turn reads its prices (Lookup).
//
// The data is models.json, checked in: prices are as each provider published them on the
// entry's PricesAsOf date, taken by hand (docs/api.md, "Model catalogue", says from where). A
// price that was not found is absent, never guessed.
package catalogue

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
)

// Model is one model of the catalogue.
type Model struct {
	// ID is the provider's model id: what the model block's "model" field takes.
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Label    string `json:"label"`
	// ContextWindow and MaxOutputTokens are in tokens; 0 (absent) where not found.
	ContextWindow   int          `json:"contextWindow,omitempty"`
	MaxOutputTokens int          `json:"maxOutputTokens,omitempty"`
	Capabilities    Capabilities `json:"capabilities"`
	// Pricing is nil where the prices were not found.
	Pricing *Pricing `json:"pricing,omitempty"`
	// PricesAsOf is the day (YYYY-MM-DD) the prices were taken.
	PricesAsOf string `json:"pricesAsOf,omitempty"`
}

// Handle is the model as "provider/id", the App Server's model_handle.
func (m Model) Handle() string { return m.Provider + "/" + m.ID }

// Capabilities are what the model takes and does.
type Capabilities struct {
	Tools            bool `json:"tools"`
	Images           bool `json:"images"`
	Reasoning        bool `json:"reasoning"`
	StructuredOutput bool `json:"structuredOutput"`
	Caching          bool `json:"caching"`
}

// Pricing is in USD per million tokens; a cache price is nil where the provider publishes none.
type Pricing struct {
	InputPerMTok      float64  `json:"inputPerMTok"`
	OutputPerMTok     float64  `json:"outputPerMTok"`
	CacheReadPerMTok  *float64 `json:"cacheReadPerMTok,omitempty"`
	CacheWritePerMTok *float64 `json:"cacheWritePerMTok,omitempty"`
}

//go:embed models.json
var data []byte

var models = mustParse(data)

// mustParse reads the checked-in catalogue; the package's tests hold it to Check.
func mustParse(b []byte) []Model {
	var file struct {
		Models []Model `json:"models"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		panic("catalogue: models.json: " + err.Error())
	}
	return file.Models
}

// All is every model of the catalogue, in its order (by provider, then as curated).
func All() []Model { return slices.Clone(models) }

// Lookup finds a provider's model by its id.
func Lookup(provider, id string) (Model, bool) {
	i := slices.IndexFunc(models, func(m Model) bool { return m.Provider == provider && m.ID == id })
	if i < 0 {
		return Model{}, false
	}
	return models[i], true
}

// Check reports the first problem of a catalogue: a model without id, provider or label, a
// handle listed twice, a price without the day it was taken or a negative one.
func Check(list []Model) error {
	seen := map[string]bool{}
	for i, m := range list {
		switch {
		case m.ID == "" || m.Provider == "" || m.Label == "":
			return fmt.Errorf("models[%d]: id, provider and label are required", i)
		case seen[m.Handle()]:
			return fmt.Errorf("models[%d]: %s is listed twice", i, m.Handle())
		case m.ContextWindow < 0 || m.MaxOutputTokens < 0:
			return fmt.Errorf("models[%d] (%s): a token count is negative", i, m.Handle())
		}
		seen[m.Handle()] = true
		if p := m.Pricing; p != nil {
			if m.PricesAsOf == "" {
				return fmt.Errorf("models[%d] (%s): pricing without pricesAsOf", i, m.Handle())
			}
			for _, v := range []*float64{&p.InputPerMTok, &p.OutputPerMTok, p.CacheReadPerMTok, p.CacheWritePerMTok} {
				if v != nil && *v < 0 {
					return fmt.Errorf("models[%d] (%s): a price is negative", i, m.Handle())
				}
			}
		}
	}
	return nil
}

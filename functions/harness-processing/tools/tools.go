// Package tools builds an agent's model-facing ToolSet from its config.tools. The static
// factories map below is the only source of tool names: a name it does not hold is rejected.
package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agentharness/harness/shared/tool"
)

// Options is one tool's config.tools entry, with the keys every tool shares removed.
type Options map[string]json.RawMessage

// Factory returns the tools a config entry enables. It reads its options and credentials and
// does no orchestration.
type Factory func(opts Options) ([]tool.Tool, error)

// factories maps exact model-facing names to their factories.
var factories = map[string]Factory{
	"current_time": currentTime,
}

// Names lists the tool names an agent may enable.
func Names() []string {
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Build returns the ToolSet for an agent's config.tools. Omitting a tool or setting
// "enabled": false disables it.
func Build(config map[string]json.RawMessage) (*tool.Set, error) {
	var all []tool.Tool
	for _, name := range sortedKeys(config) {
		factory, ok := factories[name]
		if !ok {
			return nil, fmt.Errorf("config.tools.%s: unknown tool (known: %v)", name, Names())
		}
		opts := Options{}
		if err := json.NewDecoder(bytes.NewReader(config[name])).Decode(&opts); err != nil {
			return nil, fmt.Errorf("config.tools.%s: %w", name, err)
		}
		enabled := true
		if raw, ok := opts["enabled"]; ok {
			if err := json.Unmarshal(raw, &enabled); err != nil {
				return nil, fmt.Errorf("config.tools.%s.enabled: must be true or false", name)
			}
			delete(opts, "enabled")
		}
		if !enabled {
			continue
		}
		ts, err := factory(opts)
		if err != nil {
			return nil, fmt.Errorf("config.tools.%s: %w", name, err)
		}
		all = append(all, ts...)
	}
	return tool.NewSet(all...)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// rejectOptions fails on any option a tool does not accept.
func rejectOptions(opts Options) error {
	for k := range opts {
		return fmt.Errorf("option %q is not accepted by this tool", k)
	}
	return nil
}

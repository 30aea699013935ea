package skilltools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/state/skills"
	"github.com/tiktoken-go/tokenizer"
)

// BenchmarkSkillsPromptTokens measures progressive disclosure: the prompt tokens (o200k_base,
// GPT-4o's encoding) an agent with 20 skills sends before any load_skill call (the system
// prompt's skills section and the two skill tools' specs), against the same 20 skills' bodies
// put in the system prompt whole, and one load_skill result. Each synthetic skill has a
// 160-character description and a 4 KiB body of prose, the size of a typical SKILL.md.
func BenchmarkSkillsPromptTokens(b *testing.B) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		b.Fatal(err)
	}
	count := func(s string) float64 {
		ids, _, err := enc.Encode(s)
		if err != nil {
			b.Fatal(err)
		}
		return float64(len(ids))
	}
	const n = 20
	set := skillSet{pinned: map[string]skills.Skill{}, deleted: map[string]bool{}}
	var inlined strings.Builder
	body := ""
	for i := range n {
		name := fmt.Sprintf("skill-%02d", i)
		desc := fmt.Sprintf("Guides the agent through task %d: when to use it, which inputs it needs, and how to check the result before handing it back.", i)
		desc += strings.Repeat(" More detail.", (160-len(desc))/13)
		var body4k strings.Builder
		for body4k.Len() < 4096 {
			fmt.Fprintf(&body4k, "Step %d of task %d: read the request, gather the inputs named above, draft the output in the house format, then review it against the checklist and fix what fails. ", body4k.Len()/100, i)
		}
		set.names = append(set.names, name)
		set.pinned[name] = skills.Skill{Name: name, Description: desc, Version: 1}
		fmt.Fprintf(&inlined, "\n\n## Skill %s\n\n%s", name, body4k.String())
		body = body4k.String()
	}
	var specs strings.Builder
	for _, t := range set.tools(nil, "acct") {
		spec, _ := json.Marshal(map[string]any{"name": t.Name, "description": t.Description, "input_schema": t.InputSchema})
		specs.Write(spec)
	}
	loaded, _ := json.Marshal(map[string]any{"name": "skill-19", "version": 1, "instructions": body, "files": []string{}})
	var listed, whole, one float64
	for b.Loop() {
		listed = count(set.prompt()) + count(specs.String())
		whole = count(inlined.String())
		one = count(string(loaded))
	}
	b.ReportMetric(listed, "listed-tokens")
	b.ReportMetric(whole, "inlined-tokens")
	b.ReportMetric(one, "load_skill-tokens")
}

// Package skilltools offers an agent's config.skills, disclosed progressively: its system prompt
// lists each skill's name and description only, and load_skill gives the model a skill's
// instructions when it asks (read_skill_file, a file of the skill). The turn pins the version of
// each skill it starts with, so an upload while it runs changes nothing under it.
package skilltools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/tool"
	"github.com/agentharness/harness/shared/tool/toolset"
)

// Store is what the toolset reads of an account's skills (shared/state/skills).
type Store interface {
	List(ctx context.Context, accountID string) ([]skills.Skill, error)
	Load(ctx context.Context, accountID, name string, version int64) (*skills.Bundle, error)
}

// Toolset offers config.skills (turn.Toolset).
type Toolset struct{ store Store }

// New returns the toolset of config.skills, reading them from st; nil: agents that name skills
// cannot run.
func New(st Store) *Toolset { return &Toolset{store: st} }

// maxFileText bounds what read_skill_file returns of one file.
const maxFileText = 128 << 10

// errNoSkills stops an agent that names skills where the deployment keeps none.
var errNoSkills = errors.New("it names skills, and this deployment keeps none (SKILLS_TABLE and SKILLS_BUCKET are not set)")

// Offer pins the account's current version of each skill the agent names (one read), lists them
// in the system prompt and gives load_skill and read_skill_file.
func (s *Toolset) Offer(ctx context.Context, b toolset.Build) (toolset.Offer, error) {
	names := b.Config.Skills
	if len(names) == 0 {
		return toolset.Offer{}, nil
	}
	if s.store == nil {
		return toolset.Offer{}, &toolset.ConfigError{Err: errNoSkills}
	}
	set := skillSet{names: names, pinned: map[string]skills.Skill{}, deleted: map[string]bool{}}
	all, err := s.store.List(ctx, b.AccountID)
	if err != nil {
		return toolset.Offer{}, fmt.Errorf("reading the account's skills: %w", err)
	}
	for _, sk := range all {
		set.pinned[sk.Name] = sk
	}
	for _, n := range names {
		if _, ok := set.pinned[n]; !ok {
			set.deleted[n] = true
		}
	}
	return toolset.Offer{System: set.prompt(), Tools: set.tools(s.store, b.AccountID)}, nil
}

// skillSet is the skills one turn of an agent may load: each named skill at the version the
// turn pinned, and the names of those the account no longer has.
type skillSet struct {
	names   []string
	pinned  map[string]skills.Skill
	deleted map[string]bool
}

// prompt is the system prompt's list of the skills: name and description only. A skill the
// account deleted stays listed as such, so the model can say why it cannot follow it.
func (s skillSet) prompt() string {
	var b strings.Builder
	b.WriteString("\n\n## Skills\n\nSkills are instructions for particular tasks. When a task matches a skill's description, call " +
		agentconfig.LoadSkill + " with its name before you start and follow what it says; " + agentconfig.ReadSkillFile +
		" reads a file the skill refers to.\n\n")
	for _, n := range s.names {
		if s.deleted[n] {
			fmt.Fprintf(&b, "- %s: (unavailable: it was deleted from this account)\n", n)
			continue
		}
		fmt.Fprintf(&b, "- %s: %s\n", n, oneLine(s.pinned[n].Description))
	}
	return strings.TrimRight(b.String(), "\n")
}

// oneLine keeps a description to one list item.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// tools are load_skill and read_skill_file for the set, reading accountID's skills from st; each
// version a turn loads is read once.
func (s skillSet) tools(st Store, accountID string) []tool.Tool {
	var mu sync.Mutex
	loaded := map[string]*skills.Bundle{}
	load := func(ctx context.Context, name string) (*skills.Bundle, error) {
		if s.deleted[name] {
			return nil, fmt.Errorf("skill %s was deleted from this account, so it cannot be loaded; do the task without it or tell the user", name)
		}
		mu.Lock()
		defer mu.Unlock()
		if b, ok := loaded[name]; ok {
			return b, nil
		}
		pin := s.pinned[name]
		b, err := st.Load(ctx, accountID, name, pin.Version)
		if errors.Is(err, skills.ErrNotFound) {
			return nil, fmt.Errorf("skill %s was deleted from this account while this turn ran (it had version %d), so it cannot be loaded; do the task without it or tell the user", name, pin.Version)
		}
		if err != nil {
			return nil, err
		}
		loaded[name] = b
		return b, nil
	}
	names, _ := json.Marshal(s.names)
	nameProp := `"name":{"type":"string","enum":` + string(names) + `,"description":"The skill's name."}`
	return []tool.Tool{{
		Name:        agentconfig.LoadSkill,
		Description: "Loads a skill's instructions (its SKILL.md) and lists its files. Call it before a task the skill's description matches.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + nameProp + `},"required":["name"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			var args struct{ Name string }
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			b, err := load(ctx, args.Name)
			if err != nil {
				return nil, err
			}
			files := make([]string, 0, len(b.Files))
			for _, f := range b.Files {
				files = append(files, f.Path)
			}
			return map[string]any{"name": b.Name, "version": b.Version, "instructions": b.Body, "files": files}, nil
		},
	}, {
		Name:        agentconfig.ReadSkillFile,
		Description: "Reads one file of a skill, by its path within the skill as load_skill lists it.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + nameProp + `,"path":{"type":"string","description":"The file's path within the skill, such as reference/guide.md."}},"required":["name","path"],"additionalProperties":false}`),
		Execute: func(ctx context.Context, input json.RawMessage) (any, error) {
			var args struct{ Name, Path string }
			if err := json.Unmarshal(input, &args); err != nil {
				return nil, err
			}
			b, err := load(ctx, args.Name)
			if err != nil {
				return nil, err
			}
			data, err := b.File(args.Path)
			if err != nil {
				return nil, err
			}
			if !utf8.Valid(data) {
				return nil, fmt.Errorf("%s is a binary file of %d bytes; read_skill_file returns text only", args.Path, len(data))
			}
			out := map[string]any{"name": b.Name, "path": args.Path, "content": string(data)}
			if len(data) > maxFileText {
				cut := maxFileText
				for !utf8.RuneStart(data[cut]) {
					cut--
				}
				out["content"], out["truncated"], out["bytes"] = string(data[:cut]), true, len(data)
			}
			return out, nil
		},
	}}
}

package agentconfig

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
)

// Skills is config.skills: the names of the account's skills the agent may load (002's
// registry step 4). Its system prompt lists each one's name and description; load_skill gives
// the model a skill's body when it asks.
type Skills []string

// SkillName is the grammar of a skill's name, as Agent Skills spell it: lower-case letters,
// digits and single hyphens between them, at most 64 characters.
var SkillName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// MaxSkillName bounds a skill's name; MaxSkills bounds config.skills.
const (
	MaxSkillName = 64
	MaxSkills    = 100
)

// SkillNameProblem says what is wrong with a skill's name; empty when nothing is.
func SkillNameProblem(name string) string {
	if len(name) == 0 || len(name) > MaxSkillName || !SkillName.MatchString(name) {
		return fmt.Sprintf("%q is not a skill name: 1 to %d lower-case letters, digits and single hyphens between them", name, MaxSkillName)
	}
	return ""
}

// UnmarshalJSON decodes config.skills, its refusals a *FieldError at the exact field.
func (s *Skills) UnmarshalJSON(raw []byte) error {
	var names []json.RawMessage
	if err := json.Unmarshal(raw, &names); err != nil {
		return &FieldError{Field: "skills", Problem: "must be an array of skill names"}
	}
	if len(names) > MaxSkills {
		return &FieldError{Field: "skills", Problem: fmt.Sprintf("names %d skills, more than %d", len(names), MaxSkills)}
	}
	out := make(Skills, 0, len(names))
	for i, r := range names {
		at := fmt.Sprintf("skills[%d]", i)
		var name string
		if err := json.Unmarshal(r, &name); err != nil {
			return &FieldError{Field: at, Problem: "must be a string"}
		}
		if p := SkillNameProblem(name); p != "" {
			return &FieldError{Field: at, Problem: p}
		}
		if slices.Contains(out, name) {
			return &FieldError{Field: at, Problem: fmt.Sprintf("%q is named twice", name)}
		}
		out = append(out, name)
	}
	*s = out
	return nil
}

// The tools the harness gives an agent with skills.
const (
	LoadSkill     = "load_skill"
	ReadSkillFile = "read_skill_file"
)

// SkillTools are the names of the tools the harness gives an agent with skills.
var SkillTools = []string{LoadSkill, ReadSkillFile}

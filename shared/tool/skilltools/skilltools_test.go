package skilltools_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/functions/turnwire"
	"github.com/agentharness/harness/infra/testenv"
	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/turn"
)

// newSkillsEnv runs turns on an engine that reads skills from the stack's skills table and
// bucket; it returns the store to upload them with.
func newSkillsEnv(t *testing.T) (*testenv.Turns, *skills.Store) {
	t.Helper()
	var st *skills.Store
	e := testenv.NewTurns(t, func(e *testenv.Turns, o *turn.Options) {
		st = skills.New(e.Stack.DB, e.Stack.Name("SkillsTable"), e.Stack.S3, e.Stack.Name("SkillsBucket"))
		e.Agents.WithSkills(st) // configs naming skills are checked against them
		o.Toolsets = turnwire.Toolsets(o.Model, o.Tools, nil, st, nil, nil)
	})
	return e, st
}

// upload puts a skill with a SKILL.md of description and body, and files.
func upload(t *testing.T, st *skills.Store, accountID, name, description, body string, files map[string]string) skills.Skill {
	t.Helper()
	all := map[string]string{"SKILL.md": "---\nname: " + name + "\ndescription: " + description + "\n---\n" + body}
	for p, c := range files {
		all[p] = c
	}
	b, err := skills.ParseFiles(all)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Put(t.Context(), accountID, b, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// outputs are the stored results of the conversation's calls, in order.
func outputs(msgs []model.Message) []model.Part {
	var out []model.Part
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == model.PartToolResult {
				out = append(out, p)
			}
		}
	}
	return out
}

// The system prompt lists each skill by name and description, never its body; load_skill gives
// the body and the files, read_skill_file a file, and a path that leaves the skill is refused
// without reading anything of another skill.
func TestSkillsAreListedThenLoaded(t *testing.T) {
	e, st := newSkillsEnv(t)
	upload(t, st, e.Account, "release-notes", "Writes release notes from a list of changes.", "RELEASE BODY: group changes by kind.", map[string]string{"template.md": "## Added\n## Fixed"})
	upload(t, st, e.Account, "incident-report", "Writes an incident report.", "INCIDENT BODY: timeline first.", map[string]string{"checklist.md": "- impact"})
	e.Agent("writer", `{"name":"writer","system":"You write.","skills":["release-notes","incident-report"],"model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"load_skill","input":{"name":"release-notes"}},
			{"name":"read_skill_file","input":{"name":"release-notes","path":"template.md"}},
			{"name":"read_skill_file","input":{"name":"release-notes","path":"../incident-report/SKILL.md"}},
			{"name":"read_skill_file","input":{"name":"release-notes","path":"/etc/passwd"}},
			{"name":"read_skill_file","input":{"name":"release-notes","path":"checklist.md"}}]},
		{"text":"Done."}]}}`)
	if o, _ := e.Say("conv_skills", "writer", "write the notes"); o.Status != turn.StatusCompleted {
		t.Fatalf("the turn ended %+v", o)
	}
	first := e.RequestsWith("You write.")
	if len(first) == 0 {
		t.Fatal("no request carried the agent's system prompt")
	}
	system := first[0].System
	for _, want := range []string{"- release-notes: Writes release notes from a list of changes.", "- incident-report: Writes an incident report."} {
		if !strings.Contains(system, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, system)
		}
	}
	if strings.Contains(system, "BODY") {
		t.Errorf("the system prompt holds a skill's body:\n%s", system)
	}
	names := []string{}
	for _, s := range first[0].Tools {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, "load_skill") || !slices.Contains(names, "read_skill_file") {
		t.Errorf("the model is offered %v, want load_skill and read_skill_file", names)
	}

	res := outputs(e.History("conv_skills"))
	if len(res) != 5 {
		t.Fatalf("%d results, want 5: %+v", len(res), res)
	}
	var loaded struct {
		Instructions string
		Files        []string
		Version      int64
	}
	if err := json.Unmarshal(res[0].Output, &loaded); err != nil || res[0].IsError || !strings.Contains(loaded.Instructions, "RELEASE BODY") ||
		!slices.Equal(loaded.Files, []string{"template.md"}) || loaded.Version != 1 {
		t.Errorf("load_skill gave %s, want the body, its file and version 1", res[0].Output)
	}
	if res[1].IsError || !strings.Contains(string(res[1].Output), "## Added") {
		t.Errorf("read_skill_file gave %s, want template.md", res[1].Output)
	}
	for _, r := range res[2:] {
		if !r.IsError || !strings.Contains(string(r.Output), "bad skill file path") || strings.Contains(string(r.Output), "INCIDENT BODY") || strings.Contains(string(r.Output), "impact") {
			t.Errorf("a path outside the skill gave %s (error %v), want a refusal that reads nothing", r.Output, r.IsError)
		}
	}
}

// A turn reads the version of a skill it started with, whatever is uploaded while it runs.
func TestATurnKeepsTheSkillVersionItStartedWith(t *testing.T) {
	e, st := newSkillsEnv(t)
	upload(t, st, e.Account, "style", "House style.", "STYLE ONE", nil)
	e.Agent("styled", `{"name":"styled","skills":["style"],"model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"load_skill","input":{"name":"style"}}]},{"text":"ok"}]}}`)
	req := turn.Request{ConversationID: "conv_version", AgentID: "styled"}
	cfg, err := e.Engine.Agent(e.Ctx, e.Account, req, false)
	if err != nil {
		t.Fatal(err)
	}
	// A new version lands after the turn began.
	if v := upload(t, st, e.Account, "style", "House style.", "STYLE TWO", nil); v.Version != 2 {
		t.Fatalf("the upload made version %d, want 2", v.Version)
	}
	r, err := e.Engine.Begin(e.Ctx, turn.Start{AccountID: e.Account, Request: req, Config: cfg,
		Input: turn.Input{Message: &model.Message{ID: "msg_v", Role: model.RoleUser, Parts: []model.Part{{Type: model.PartText, Text: "go"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	o := r.Execute(e.Ctx)
	if err := r.Finish(e.Ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	res := outputs(e.History("conv_version"))
	if len(res) != 1 || res[0].IsError || !strings.Contains(string(res[0].Output), "STYLE ONE") {
		t.Errorf("load_skill gave %+v, want version 1's body", res)
	}
	// The next turn starts with version 2.
	e.Say("conv_version_next", "styled", "again")
	if res := outputs(e.History("conv_version_next")); len(res) != 1 || !strings.Contains(string(res[0].Output), "STYLE TWO") {
		t.Errorf("the next turn's load_skill gave %+v, want version 2's body", res)
	}
}

// A skill deleted while an agent still names it is explained to the model, in its system prompt
// and by load_skill, and the turn goes on; another account's skill of the same name is never
// read in its place.
func TestADeletedSkillIsExplained(t *testing.T) {
	e, st := newSkillsEnv(t)
	upload(t, st, e.Account, "gone", "Soon deleted.", "MINE", nil)
	e.Agent("orphan", `{"name":"orphan","skills":["gone"],"model":{"provider":"scripted","script":[
		{"toolCalls":[{"name":"load_skill","input":{"name":"gone"}},{"name":"read_skill_file","input":{"name":"gone","path":"SKILL.md"}}]},{"text":"Sorry: {{toolResults}}"}]}}`)
	if err := st.Delete(e.Ctx, e.Account, "gone"); err != nil {
		t.Fatal(err)
	}
	other, _, err := e.Store.CreateAccount(e.Ctx, "other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	upload(t, st, other.ID, "gone", "Someone else's.", "THEIRS", nil)

	o, _ := e.Say("conv_gone", "orphan", "use it")
	if o.Status != turn.StatusCompleted {
		t.Fatalf("the turn ended %+v, want it to go on without the skill", o)
	}
	msgs := e.History("conv_gone")
	for _, r := range outputs(msgs) {
		if !r.IsError || !strings.Contains(string(r.Output), "skill gone was deleted from this account") || strings.Contains(string(r.Output), "THEIRS") {
			t.Errorf("a call on the deleted skill gave %s (error %v), want the deletion explained", r.Output, r.IsError)
		}
	}
	var system string
	if reqs := e.RequestsWith("- gone:"); len(reqs) > 0 {
		system = reqs[0].System
	}
	if !strings.Contains(system, "- gone: (unavailable: it was deleted from this account)") || strings.Contains(system, "Someone else's") {
		t.Errorf("the system prompt says %q, want gone listed as deleted", system)
	}
}

package localrunner_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/testenv"
)

const releaseNotesMD = `---
name: release-notes
description: Writes release notes from merged changes.
license: Apache-2.0
---
# Release notes

Fill in template.md.
`

// zipped is a zip of files, in the order given (name, content, name, content…).
func zipped(t *testing.T, files ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for i := 0; i < len(files); i += 2 {
		f, err := w.Create(files[i])
		if err == nil {
			_, err = f.Write([]byte(files[i+1]))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// filesJSON is the JSON upload of files (path, text, path, text…).
func filesJSON(t *testing.T, files ...string) []byte {
	t.Helper()
	m := map[string]string{}
	for i := 0; i < len(files); i += 2 {
		m[files[i]] = files[i+1]
	}
	b, err := json.Marshal(map[string]any{"files": m})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantField asserts a refusal's status and the field it names.
func wantField(t *testing.T, what string, res response, status int, field string) {
	t.Helper()
	if res.status != status {
		t.Errorf("%s = %d %s, want %d naming %s", what, res.status, res.body, status, field)
		return
	}
	if got, _ := res.json(t)["field"].(string); got != field {
		t.Errorf("%s names field %q (%s), want %q", what, got, res.body, field)
	}
}

// TestSkillsAPI goes through account-manage's skill routes over HTTP: uploads as a zip and as
// JSON, listing, reading a skill and its files, replacing it, the refusals, the check of
// config.skills when a config is written, and deletion; another account sees none of it.
func TestSkillsAPI(t *testing.T) {
	srv := runner(t, nil)
	_, secret := createAccount(t, srv, "ada")
	_, other := createAccount(t, srv, "eve")
	const skillPath = "/accounts/me/skills/release-notes"

	// What another account gets for a skill that exists nowhere, to compare once it exists.
	absent := map[string]response{}
	for _, p := range []string{skillPath, skillPath + "?file=template.md"} {
		absent["GET "+p] = call(t, srv, http.MethodGet, p, other, "")
	}
	absent["DELETE "+skillPath] = call(t, srv, http.MethodDelete, skillPath, other, "")
	for what, res := range absent {
		if res.status != http.StatusNotFound {
			t.Fatalf("%s of a skill that does not exist = %d %s, want 404", what, res.status, res.body)
		}
	}

	// A config naming a skill the account lacks is refused at the name.
	cfg := `{"agentId":"writer","name":"writer","model":{"provider":"scripted","script":[{"text":"hi"}]},"skills":["release-notes"]}`
	wantField(t, "an agent naming a skill not uploaded", call(t, srv, http.MethodPost, "/accounts/me/agents", secret, cfg), http.StatusBadRequest, "skills[0]")

	// A zip of the skill's folder.
	res, _ := request(t, srv, http.MethodPost, "/accounts/me/skills", secret, "application/zip",
		zipped(t, "release-notes/SKILL.md", releaseNotesMD, "release-notes/template.md", "## {{version}}\n", "release-notes/notes/", ""))
	if res.status != http.StatusCreated {
		t.Fatalf("uploading a zip = %d %s, want 201", res.status, res.body)
	}
	var up struct {
		Name    string
		Version int64
		Files   []struct {
			Path  string
			Bytes int64
		}
		Bytes     int64
		CreatedAt time.Time
	}
	if err := json.Unmarshal(res.body, &up); err != nil || up.Name != "release-notes" || up.Version != 1 || len(up.Files) != 1 ||
		up.Files[0].Path != "template.md" || up.Files[0].Bytes != 15 || up.Bytes != int64(len(releaseNotesMD))+15 || up.CreatedAt.IsZero() {
		t.Errorf("the zip upload answered %s, want release-notes at version 1 with template.md", res.body)
	}
	// JSON.
	res, _ = request(t, srv, http.MethodPost, "/accounts/me/skills", secret, "application/json; charset=utf-8",
		filesJSON(t, "SKILL.md", "---\nname: incident-report\ndescription: Writes incident reports.\n---\nUse the checklist.\n", "checklist.md", "- [ ] impact\n"))
	if res.status != http.StatusCreated {
		t.Fatalf("uploading JSON = %d %s, want 201", res.status, res.body)
	}

	list := call(t, srv, http.MethodGet, "/accounts/me/skills", secret, "")
	var listed struct{ Skills []struct{ Name string } }
	if err := json.Unmarshal(list.body, &listed); err != nil || len(listed.Skills) != 2 || listed.Skills[0].Name != "incident-report" || listed.Skills[1].Name != "release-notes" {
		t.Errorf("GET /accounts/me/skills = %d %s, want incident-report and release-notes", list.status, list.body)
	}
	if res := call(t, srv, http.MethodGet, "/accounts/me/skills", other, ""); res.status != http.StatusOK || string(res.body) != "{\"skills\":[]}\n" {
		t.Errorf("another account's list = %d %s, want no skills", res.status, res.body)
	}

	got := call(t, srv, http.MethodGet, skillPath, secret, "")
	if got.status != http.StatusOK || got.json(t)["body"] != "# Release notes\n\nFill in template.md." || got.json(t)["version"] != 1.0 {
		t.Errorf("GET %s = %d %s, want version 1 and its body", skillPath, got.status, got.body)
	}
	for file, want := range map[string]string{"template.md": "## {{version}}\n", "SKILL.md": releaseNotesMD} {
		res, header := request(t, srv, http.MethodGet, skillPath+"?file="+file, secret, "", nil)
		if res.status != http.StatusOK || string(res.body) != want || header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("GET ?file=%s = %d %q (%s), want its bytes", file, res.status, res.body, header.Get("Content-Type"))
		}
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a/../../b", `a%5Cb`, "notes/../../../etc/passwd", ""} {
		wantField(t, "GET ?file="+bad, call(t, srv, http.MethodGet, skillPath+"?file="+bad, secret, ""), http.StatusBadRequest, "file")
	}
	if res := call(t, srv, http.MethodGet, skillPath+"?file=notes.md", secret, ""); res.status != http.StatusNotFound || !strings.Contains(string(res.body), "its files: SKILL.md, template.md") {
		t.Errorf("GET ?file= of a file the skill lacks = %d %s, want 404 listing its files", res.status, res.body)
	}
	wantField(t, "GET of a name off the grammar", call(t, srv, http.MethodGet, "/accounts/me/skills/Release_Notes", secret, ""), http.StatusBadRequest, "name")
	wantField(t, "DELETE of a name off the grammar", call(t, srv, http.MethodDelete, "/accounts/me/skills/a--b", secret, ""), http.StatusBadRequest, "name")

	// Another account gets exactly what it got before the skill existed.
	for what, before := range absent {
		method, path, _ := strings.Cut(what, " ")
		if now := call(t, srv, method, path, other, ""); now.status != before.status || !bytes.Equal(now.body, before.body) {
			t.Errorf("%s of another account's skill = %d %s, want exactly %d %s", what, now.status, now.body, before.status, before.body)
		}
	}

	// The agent may name it now; a replacement is a new version.
	if res := call(t, srv, http.MethodPost, "/accounts/me/agents", secret, cfg); res.status != http.StatusCreated {
		t.Fatalf("an agent naming the uploaded skill = %d %s, want 201", res.status, res.body)
	}
	res, _ = request(t, srv, http.MethodPost, "/accounts/me/skills", secret, "application/json",
		filesJSON(t, "SKILL.md", strings.Replace(releaseNotesMD, "Fill in", "Always fill in", 1), "template.md", "## v"))
	if res.status != http.StatusOK || res.json(t)["version"] != 2.0 {
		t.Errorf("replacing the skill = %d %s, want 200 at version 2", res.status, res.body)
	}
	if got := call(t, srv, http.MethodGet, skillPath, secret, ""); got.json(t)["body"] != "# Release notes\n\nAlways fill in template.md." || got.json(t)["version"] != 2.0 {
		t.Errorf("after the replacement GET %s = %s, want version 2's body", skillPath, got.body)
	}

	// Refused uploads name what is wrong, and change nothing.
	upload := func(contentType string, body []byte) response {
		res, _ := request(t, srv, http.MethodPost, "/accounts/me/skills", secret, contentType, body)
		return res
	}
	if res := upload("text/markdown", []byte(releaseNotesMD)); res.status != http.StatusUnsupportedMediaType {
		t.Errorf("a Markdown body = %d %s, want 415", res.status, res.body)
	}
	if res := upload("", []byte(releaseNotesMD)); res.status != http.StatusUnsupportedMediaType {
		t.Errorf("a body with no content type = %d %s, want 415", res.status, res.body)
	}
	wantField(t, "an unknown key", upload("application/json", []byte(`{"files":{"SKILL.md":"x"},"name":"x"}`)), http.StatusBadRequest, "name")
	wantField(t, "a key twice", upload("application/json", []byte(`{"files":{"SKILL.md":"x","SKILL.md":"y"}}`)), http.StatusBadRequest, "files.SKILL.md")
	wantField(t, "a path that climbs", upload("application/json", filesJSON(t, "SKILL.md", releaseNotesMD, "scripts/../x", "x")), http.StatusBadRequest, `files["scripts/../x"]`)
	wantField(t, "a name off the grammar", upload("application/json", filesJSON(t, "SKILL.md", strings.Replace(releaseNotesMD, "name: release-notes", "name: Release Notes", 1))), http.StatusBadRequest, "SKILL.md.name")
	wantField(t, "no description", upload("application/json", filesJSON(t, "SKILL.md", "---\nname: x\n---\n")), http.StatusBadRequest, "SKILL.md.description")
	wantField(t, "a description with a control character", upload("application/json", filesJSON(t, "SKILL.md", "---\nname: release-notes\ndescription: \"Writes notes.\\e[2J\"\n---\n")), http.StatusBadRequest, "SKILL.md.description")
	wantField(t, "a zip without SKILL.md", upload("application/zip", zipped(t, "README.md", "x")), http.StatusBadRequest, `files["SKILL.md"]`)
	wantField(t, "a zip bomb", upload("application/zip", zipped(t, "SKILL.md", releaseNotesMD, "zeros", strings.Repeat("0", 9<<20))), http.StatusRequestEntityTooLarge, "files")
	if res := upload("application/zip", make([]byte, 5<<20+1)); res.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over 5 MiB = %d %s, want 413", res.status, res.body)
	}
	if got := call(t, srv, http.MethodGet, skillPath, secret, ""); got.json(t)["version"] != 2.0 {
		t.Errorf("after the refused uploads the skill is %s, want version 2", got.body)
	}

	// Deleted, it is gone, and configs may no longer name it.
	if res := call(t, srv, http.MethodDelete, skillPath, secret, ""); res.status != http.StatusNoContent {
		t.Fatalf("DELETE %s = %d %s, want 204", skillPath, res.status, res.body)
	}
	if res := call(t, srv, http.MethodGet, skillPath, secret, ""); res.status != http.StatusNotFound {
		t.Errorf("GET after DELETE = %d %s, want 404", res.status, res.body)
	}
	if res := call(t, srv, http.MethodDelete, skillPath, secret, ""); res.status != http.StatusNotFound {
		t.Errorf("a second DELETE = %d %s, want 404", res.status, res.body)
	}
	wantField(t, "a patch after the skill was deleted", call(t, srv, http.MethodPatch, "/accounts/me/agents/writer", secret, `{"maxSteps":3}`), http.StatusBadRequest, "skills[0]")
	wantField(t, "a new agent naming the deleted skill", call(t, srv, http.MethodPost, "/accounts/me/agents", secret, strings.Replace(cfg, `"writer"`, `"writer-2"`, 1)), http.StatusBadRequest, "skills[0]")
}

// make dev's seed uploads every folder under examples/skills before the agents, which name them.
func TestSeedUploadsTheExampleSkills(t *testing.T) {
	stack := testenv.Stack(t)
	r, srv := testenv.Serve(t, stack.Options(nil))
	seed, err := localrunner.ReadSeed(filepath.Join(testenv.Root(t), "examples", "account.config.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(testenv.Root(t), "examples", "skills"); seed.SkillsDir != want {
		t.Errorf("SkillsDir = %s, want %s (relative to the seed file)", seed.SkillsDir, want)
	}
	_, secret, err := r.Seed(context.Background(), seed, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, srv, http.MethodGet, "/accounts/me/skills", secret, "")
	var listed struct {
		Skills []struct {
			Name  string
			Files []struct{ Path string }
		}
	}
	if err := json.Unmarshal(res.body, &listed); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range listed.Skills {
		names = append(names, s.Name)
		if len(s.Files) == 0 {
			t.Errorf("the example skill %s has no file besides SKILL.md", s.Name)
		}
	}
	if !slices.Equal(names, []string{"incident-report", "release-notes"}) {
		t.Errorf("seeded skills = %v (%s), want incident-report and release-notes", names, res.body)
	}
}

package accounts

import (
	"errors"
	"mime"
	"net/http"

	"github.com/agentharness/harness/shared/agentconfig"
	"github.com/agentharness/harness/shared/state/agentstore"
	"github.com/agentharness/harness/shared/state/skills"
	"github.com/agentharness/harness/shared/state/store"
	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// AgentService is the agents service account-manage writes configs through: their secrets
// sealed with sealer, checked by checks, config.skills checked against sk and config.workspaces
// against ws (each nil where the deployment keeps none, and configs naming them are refused).
func AgentService(st *store.Store, sk *skills.Store, ws *workspaces.Store, sealer agentstore.Sealer, checks agentconfig.Checks) *agentstore.Service {
	svc := agentstore.New(st, sealer, checks, nil)
	if sk != nil {
		svc.WithSkills(sk)
	}
	if ws != nil {
		svc.WithWorkspaces(ws)
	}
	return svc
}

// checkSkillName checks the route's {name} segment, when the route has one.
func checkSkillName(r *http.Request) error {
	if name := r.PathValue("name"); name != "" {
		if p := agentconfig.SkillNameProblem(name); p != "" {
			return httpjson.FieldError("name", p)
		}
	}
	return nil
}

// skillStore is the deployment's skills, or the refusal of a deployment that keeps none.
func (h *Handler) skillStore() (*skills.Store, error) {
	if h.opts.Skills == nil {
		return nil, &httpjson.Error{Status: http.StatusNotImplemented, Message: "this deployment keeps no skills (it sets no SKILLS_TABLE and SKILLS_BUCKET)"}
	}
	return h.opts.Skills, nil
}

// skillError answers a skill's refusals: a field of the upload (413 for one past a size limit),
// a skill that is not the account's, an upload overtaken twice.
func skillError(err error, name string) error {
	var inv *skills.InvalidError
	switch {
	case errors.As(err, &inv) && inv.TooLarge:
		return &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Message: inv.Error(), Extra: map[string]any{"field": inv.Field}}
	case errors.As(err, &inv):
		return httpjson.FieldError(inv.Field, inv.Problem)
	case errors.Is(err, skills.ErrNotFound):
		return &httpjson.Error{Status: http.StatusNotFound, Message: "skill " + name + " not found"}
	case errors.Is(err, skills.ErrConflict):
		return &httpjson.Error{Status: http.StatusConflict, Message: err.Error() + "; upload it again"}
	}
	return err
}

// putSkill is POST /accounts/me/skills: a zip of the skill's folder, or JSON {"files": {path:
// text}}; the skill is the one its SKILL.md names, created (201) or given a new version (200).
func (h *Handler) putSkill(w http.ResponseWriter, r *http.Request) {
	st, err := h.skillStore()
	var b *skills.Bundle
	if err == nil {
		b, err = readSkill(w, r)
	}
	var sk skills.Skill
	created := false
	if err == nil {
		sk, created, err = st.Save(r.Context(), accountID(r), b, h.opts.Now())
	}
	if err != nil {
		h.errs.Fail(w, r, skillError(err, ""))
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	httpjson.WriteJSON(w, status, sk)
}

// readSkill parses an upload by its content type.
func readSkill(w http.ResponseWriter, r *http.Request) (*skills.Bundle, error) {
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var parse func([]byte) (*skills.Bundle, error)
	switch mediaType {
	case "application/zip", "application/x-zip-compressed":
		parse = skills.ParseZip
	case "application/json":
		parse = parseSkillJSON
	default:
		return nil, &httpjson.Error{Status: http.StatusUnsupportedMediaType, Message: `Content-Type must be application/zip (the skill's folder) or application/json ({"files": {"SKILL.md": "…"}})`}
	}
	body, err := readCapped(w, r, skills.MaxRequestBytes)
	if err != nil {
		return nil, err
	}
	return parse(body)
}

// parseSkillJSON reads {"files": {path: text}}, refusing other keys.
func parseSkillJSON(body []byte) (*skills.Bundle, error) {
	if err := checkJSON(body); err != nil {
		return nil, err
	}
	var upload struct {
		Files map[string]string `json:"files"`
	}
	if err := httpjson.DecodeStrict(body, &upload); err != nil {
		return nil, httpjson.BodyError(err)
	}
	return skills.ParseFiles(upload.Files)
}

func (h *Handler) listSkills(w http.ResponseWriter, r *http.Request) {
	st, err := h.skillStore()
	var all []skills.Skill
	if err == nil {
		all, err = st.List(r.Context(), accountID(r))
	}
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"skills": all})
}

// getSkill is the skill's current version with its body; with ?file=<path>, that file's bytes.
func (h *Handler) getSkill(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	st, err := h.skillStore()
	var b *skills.Bundle
	if err == nil {
		b, err = st.LoadCurrent(r.Context(), accountID(r), name)
	}
	if err != nil {
		h.errs.Fail(w, r, skillError(err, name))
		return
	}
	if !r.URL.Query().Has("file") {
		httpjson.WriteJSON(w, http.StatusOK, b)
		return
	}
	data, err := b.File(r.URL.Query().Get("file"))
	switch {
	case errors.Is(err, skills.ErrNoFile):
		httpjson.WriteError(w, &httpjson.Error{Status: http.StatusNotFound, Message: err.Error()})
	case err != nil:
		httpjson.WriteError(w, httpjson.FieldError("file", err.Error()))
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(data)
	}
}

func (h *Handler) deleteSkill(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	st, err := h.skillStore()
	if err == nil {
		err = st.Delete(r.Context(), accountID(r), name)
	}
	if err != nil {
		h.errs.Fail(w, r, skillError(err, name))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

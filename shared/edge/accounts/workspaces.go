package accounts

import (
	"errors"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/agentharness/harness/shared/state/workspaces"
	"github.com/agentharness/harness/shared/wire/httpjson"
)

// workspaceStore is the deployment's workspaces, or the refusal of a deployment that keeps none.
func (h *Handler) workspaceStore() (*workspaces.Store, error) {
	if h.opts.Workspaces == nil {
		return nil, &httpjson.Error{Status: http.StatusNotImplemented, Message: "this deployment keeps no workspaces (it sets no WORKSPACES_TABLE and WORKSPACES_BUCKET)"}
	}
	return h.opts.Workspaces, nil
}

// workspaceError answers a workspace's refusals: a field (413 for one past a limit), a
// workspace, version or path that is not there (or not the account's), a name taken, a commit
// that conflicts with another writer's.
func workspaceError(err error) error {
	var inv *workspaces.InvalidError
	var conflict *workspaces.Conflict
	switch {
	case errors.As(err, &inv) && inv.TooLarge:
		return &httpjson.Error{Status: http.StatusRequestEntityTooLarge, Message: inv.Error(), Extra: map[string]any{"field": inv.Field}}
	case errors.As(err, &inv):
		return httpjson.FieldError(inv.Field, inv.Problem)
	case errors.As(err, &conflict):
		return &httpjson.Error{Status: http.StatusConflict, Message: conflict.Error(), Extra: map[string]any{"paths": conflict.Paths, "version": conflict.Head}}
	case errors.Is(err, workspaces.ErrNotFound):
		return &httpjson.Error{Status: http.StatusNotFound, Message: err.Error()}
	case errors.Is(err, workspaces.ErrExists), errors.Is(err, workspaces.ErrBusy):
		return &httpjson.Error{Status: http.StatusConflict, Message: err.Error()}
	}
	return err
}

// filePath is the route's {path...}, checked; "" (the root) only where root is allowed.
func filePath(r *http.Request, root bool) (string, error) {
	p := r.PathValue("path")
	if p == "" && root {
		return "", nil
	}
	if problem := workspaces.PathProblem(p); problem != "" {
		return "", httpjson.FieldError("path", problem)
	}
	return p, nil
}

// versionParam is ?version=N, or Latest without one.
func versionParam(r *http.Request, name string) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return workspaces.Latest, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, httpjson.FieldError(name, "must be a version: a number from 0")
	}
	return v, nil
}

// ifMatch is the version an If-Match header makes a write conditional on; false without one. It
// takes the ETag a read answered ("3") as well as the bare number.
func ifMatch(r *http.Request) (int64, bool, error) {
	s := r.Header.Get("If-Match")
	if s == "" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(strings.Trim(s, `"`), 10, 64)
	if err != nil || v < 0 {
		return 0, false, httpjson.FieldError("If-Match", "must be a workspace version, as the ETag of a read")
	}
	return v, true, nil
}

func (h *Handler) createWorkspace(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	st, err := h.workspaceStore()
	if err == nil {
		err = h.decode(w, r, &body)
	}
	var ws workspaces.Workspace
	if err == nil {
		ws, err = st.Create(r.Context(), accountID(r), body.Name)
	}
	if err != nil {
		h.errs.Fail(w, r, workspaceError(err))
		return
	}
	httpjson.WriteJSON(w, http.StatusCreated, map[string]any{"name": ws.Name, "version": ws.Version, "createdAt": ws.CreatedAt})
}

func (h *Handler) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	st, err := h.workspaceStore()
	var all []workspaces.Workspace
	if err == nil {
		all, err = st.Workspaces(r.Context(), accountID(r))
	}
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"workspaces": all})
}

func (h *Handler) getWorkspace(w http.ResponseWriter, r *http.Request) {
	st, err := h.workspaceStore()
	var ws workspaces.Workspace
	if err == nil {
		ws, err = st.Get(r.Context(), accountID(r), r.PathValue("workspace"))
	}
	if err != nil {
		h.errs.Fail(w, r, workspaceError(err))
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, ws)
}

func (h *Handler) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	st, err := h.workspaceStore()
	if err == nil {
		err = st.Delete(r.Context(), accountID(r), r.PathValue("workspace"))
	}
	if err != nil {
		h.errs.Fail(w, r, workspaceError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// getFile answers a file's bytes, or a directory's listing (the root's for an empty path).
func (h *Handler) getFile(w http.ResponseWriter, r *http.Request) {
	st, err := h.workspaceStore()
	var p string
	if err == nil {
		p, err = filePath(r, true)
	}
	var version int64
	if err == nil {
		version, err = versionParam(r, "version")
	}
	var tree *workspaces.Tree
	if err == nil {
		tree, err = st.Tree(r.Context(), accountID(r), r.PathValue("workspace"), version)
	}
	if err != nil {
		h.errs.Fail(w, r, workspaceError(err))
		return
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(tree.Version, 10)))
	w.Header().Set("X-Workspace-Version", strconv.FormatInt(tree.Version, 10))
	e, isFile := tree.File(p)
	if !isFile {
		entries, ok := tree.List(p)
		if !ok {
			h.errs.Fail(w, r, &httpjson.Error{Status: http.StatusNotFound, Message: "no file or directory " + p + " at version " + strconv.FormatInt(tree.Version, 10)})
			return
		}
		httpjson.WriteJSON(w, http.StatusOK, map[string]any{"path": p, "version": tree.Version, "entries": entries})
		return
	}
	data, err := st.Blob(r.Context(), accountID(r), e.Blob)
	if err != nil {
		h.errs.Fail(w, r, err)
		return
	}
	contentType := mime.TypeByExtension(path.Ext(p))
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-SHA256", e.Blob)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// The bytes are the account's own, served from the API's origin: a browser that renders
	// them runs nothing.
	w.Header().Set("Content-Security-Policy", "sandbox")
	_, _ = w.Write(data)
}

// putFile writes the raw body to the path as one commit: over the version If-Match names, or
// over the latest, whoever else wrote.
func (h *Handler) putFile(w http.ResponseWriter, r *http.Request) {
	st, err := h.workspaceStore()
	var p string
	if err == nil {
		p, err = filePath(r, false)
	}
	var data []byte
	if err == nil {
		data, err = readCapped(w, r, workspaces.MaxFileBytes)
	}
	var c workspaces.Commit
	if err == nil {
		c, err = h.commitFile(r, st, workspaces.Change{Path: p, Data: data})
	}
	if err != nil {
		h.errs.Fail(w, r, workspaceError(err))
		return
	}
	status := http.StatusOK
	if len(c.Changes) == 1 && c.Changes[0].Change == workspaces.Added {
		status = http.StatusCreated
	}
	httpjson.WriteJSON(w, status, map[string]any{"path": p, "version": c.Version, "size": len(data), "sha256": workspaces.Digest(data)})
}

func (h *Handler) deleteFile(w http.ResponseWriter, r *http.Request) {
	st, err := h.workspaceStore()
	var p string
	if err == nil {
		p, err = filePath(r, false)
	}
	var c workspaces.Commit
	if err == nil {
		c, err = h.commitFile(r, st, workspaces.Change{Path: p, Delete: true})
	}
	if err != nil {
		h.errs.Fail(w, r, workspaceError(err))
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"path": p, "version": c.Version})
}

// commitFile commits change alone, conditional on the If-Match version when there is one.
func (h *Handler) commitFile(r *http.Request, st *workspaces.Store, change workspaces.Change) (workspaces.Commit, error) {
	base, conditional, err := ifMatch(r)
	if err != nil {
		return workspaces.Commit{}, err
	}
	commit := st.Commit
	if conditional {
		commit = st.CommitExact
	} else {
		base = workspaces.Latest
	}
	return commit(r.Context(), accountID(r), r.PathValue("workspace"), base, []workspaces.Change{change}, workspaces.Author{Kind: workspaces.ByAPI})
}

// workspaceHistory pages the workspace's commits, newest first.
func (h *Handler) workspaceHistory(w http.ResponseWriter, r *http.Request) {
	limit := int32(50)
	st, err := h.workspaceStore()
	if s := r.URL.Query().Get("limit"); err == nil && s != "" {
		n, perr := strconv.Atoi(s)
		if perr != nil || n < 1 || n > 100 {
			err = httpjson.FieldError("limit", "must be a number from 1 to 100")
		}
		limit = int32(n)
	}
	var commits []workspaces.Commit
	var next string
	if err == nil {
		commits, next, err = st.History(r.Context(), accountID(r), r.PathValue("workspace"), limit, r.URL.Query().Get("cursor"))
	}
	if err != nil {
		h.errs.Fail(w, r, workspaceError(err))
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"commits": commits, "cursor": next})
}

// workspaceDiff is how the files differ between ?from and ?to: to defaults to the latest
// version, from to the one before to.
func (h *Handler) workspaceDiff(w http.ResponseWriter, r *http.Request) {
	st, err := h.workspaceStore()
	var from, to int64
	if err == nil {
		from, err = versionParam(r, "from")
	}
	if err == nil {
		to, err = versionParam(r, "to")
	}
	name := r.PathValue("workspace")
	if err == nil && to == workspaces.Latest {
		var ws workspaces.Workspace
		ws, err = st.Get(r.Context(), accountID(r), name)
		to = ws.Version
	}
	if from == workspaces.Latest {
		from = max(to-1, 0)
	}
	var changes []workspaces.PathChange
	if err == nil {
		changes, err = st.Diff(r.Context(), accountID(r), name, from, to)
	}
	if err != nil {
		h.errs.Fail(w, r, workspaceError(err))
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, map[string]any{"from": from, "to": to, "changes": changes})
}

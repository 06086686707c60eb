package admin

import (
	"net/http"
	"strconv"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// diffBranch serves GET /v1/branches/{name}/diff?against=seed|BRANCH&data=1&source=S
// with a branches.DiffResult.
func (a *API) diffBranch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data, _ := strconv.ParseBool(q.Get("data"))
	res, err := a.m.Diff(r.Context(), r.PathValue("name"), branches.DiffOptions{
		Source: q.Get("source"), Against: q.Get("against"), Data: data})
	if err != nil {
		a.result(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// diffTarget is the branch diffed and, with ?against=BRANCH, the other one: a ci
// token must own both.
func diffTarget(r *http.Request) Target {
	t := pathTarget(r, BranchRead)
	if o := r.URL.Query().Get("against"); o != "" && o != "seed" {
		t.Branches = append(t.Branches, o)
	}
	return t
}

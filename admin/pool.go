package admin

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// SetSource is the body of PATCH /v1/sources/{name}.
type SetSource struct {
	// Warm is how many pooled branches the source keeps; -1: the server's --warm.
	Warm *int `json:"warm,omitempty"`
}

func (a *API) setSource(w http.ResponseWriter, r *http.Request) {
	var req SetSource
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, Error{Error: "invalid JSON: " + err.Error()})
		return
	}
	if req.Warm == nil {
		writeJSON(w, http.StatusBadRequest, Error{Error: "nothing to set: give warm"})
		return
	}
	a.result(w, a.m.SetWarm(r.Context(), r.PathValue("name"), *req.Warm))
}

// HoldWarm is the body of POST /v1/sources/{name}/holds: keep at least Warm pooled
// branches of the source for TTL, or until DELETE /v1/sources/{name}/holds/{id}.
type HoldWarm struct {
	Warm int          `json:"warm"`
	TTL  branches.TTL `json:"ttl"`
}

// Hold is the answer to POST /v1/sources/{name}/holds.
type Hold struct {
	ID string `json:"id"`
}

func (a *API) holdWarm(w http.ResponseWriter, r *http.Request) {
	var req HoldWarm
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, Error{Error: "invalid JSON: " + err.Error()})
		return
	}
	id, err := a.m.HoldWarm(r.Context(), r.PathValue("name"), req.Warm, time.Duration(req.TTL))
	if err != nil {
		a.result(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Hold{ID: id})
}

func (a *API) releaseWarm(w http.ResponseWriter, r *http.Request) {
	a.result(w, a.m.ReleaseWarm(r.Context(), r.PathValue("name"), r.PathValue("id")))
}

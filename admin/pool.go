package admin

import (
	"encoding/json"
	"net/http"
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

package secretsencrypt

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// The endpoints `kelp secrets-encrypt` calls, on the API port beside the
// join endpoints (k3s serves /v1-k3s/encrypt/status and /config).
const (
	StatusPath = "/v1-kelp/encrypt/status" // GET: Status
	ConfigPath = "/v1-kelp/encrypt/config" // PUT Request: Result
)

// Result answers a command.
type Result struct {
	Message string `json:"message"`
}

// Handles reports whether path is one of the endpoints.
func Handles(path string) bool { return path == StatusPath || path == ConfigPath }

// Handler serves the endpoints to holders of the server secret (basic
// auth, user "server", as k3s's CLI sends it): they change the keys of
// the whole cluster, so the agent secret and bootstrap tokens are not
// enough. A nil Encryption (a server without --secrets-encryption)
// answers status as disabled and refuses the commands.
type Handler struct {
	Encryption   *Encryption
	ServerSecret string
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, password, ok := r.BasicAuth()
	if !ok || h.ServerSecret == "" || subtle.ConstantTimeCompare([]byte(password), []byte(h.ServerSecret)) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="kelp"`)
		http.Error(w, "the token is not valid for this server", http.StatusUnauthorized)
		return
	}
	switch {
	case r.URL.Path == StatusPath && r.Method == http.MethodGet:
		st := Status{}
		if h.Encryption != nil {
			var err error
			if st, err = h.Encryption.Status(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		writeJSON(w, st)
	case r.URL.Path == ConfigPath && r.Method == http.MethodPut:
		if h.Encryption == nil {
			http.Error(w, "secrets encryption is not enabled: start kelp server with --secrets-encryption", http.StatusBadRequest)
			return
		}
		var req Request
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			http.Error(w, "decoding the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		msg, err := h.Encryption.Do(r.Context(), req)
		if err != nil {
			code := http.StatusInternalServerError
			var re *RequestError
			if errors.As(err, &re) {
				code = http.StatusBadRequest
			}
			http.Error(w, err.Error(), code)
			return
		}
		writeJSON(w, Result{Message: msg})
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

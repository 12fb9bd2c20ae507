// Package scrapyd owns crawlq's Scrapyd-compatible HTTP API: schedule.json, cancel.json,
// status.json, listjobs.json, listspiders.json, listprojects.json, listversions.json,
// addversion.json, delversion.json, delproject.json and daemonstatus.json with Scrapyd's request
// encodings (query string, urlencoded form, multipart) and response shapes, plus each run's log
// (/logs/PROJECT/SPIDER/JOB.log) and items (/items/PROJECT/SPIDER/JOB.jl), and the pages
// ScrapydWeb reads besides the JSON: Scrapyd's HTML Jobs page (/jobs), Twisted directory
// listings under /logs/ and /items/, and LogParser's JSON (/logs/P/S/JOB.json, /logs/stats.json),
// behind HTTP basic auth as Scrapyd has it. It only translates: every action is an internal/api request, so the
// Lambda payload API and this one validate and behave the same. `crawlq local` serves it on a
// port of its own; in AWS the api function serves it behind a Lambda function URL
// (LambdaHandler).
package scrapyd

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"crawlq/internal/api"
	"crawlq/internal/clock"
	"crawlq/internal/items"
	"crawlq/internal/runlog"
	"crawlq/internal/spiderstore"
)

// Config wires a Server. API is required.
type Config struct {
	API *api.API
	// Store resolves a client's jobid for /logs and /items. Required.
	Store *spiderstore.Store
	// Pool reads items for /items (the Postgres item sink) unless Items is set. Default none.
	Pool *pgxpool.Pool
	// Items reads a run's items for /items: where the sink put them (items.S3Reader for the
	// S3 sink). Default items.PostgresReader on Pool; with neither, /items answers 404.
	Items items.Reader
	// RunLog serves /logs. Default none: /logs answers 404.
	RunLog runlog.Store
	// Username and Password turn on HTTP basic auth (both or neither). Default off.
	Username, Password string
	// MaxUploadBytes bounds a request body (an addversion egg and its form). Default 50 MiB +
	// 1 MiB.
	MaxUploadBytes int64
	// NodeName is every response's node_name. Default "crawlq".
	NodeName string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock tells the pages and LogParser's figures the time (a running job's runtime). Default
	// the wall clock.
	Clock clock.Clock
}

// Server is the HTTP API.
type Server struct {
	cfg Config
	log *slog.Logger
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.API == nil:
		return nil, errors.New("scrapyd: API is required")
	case cfg.Store == nil:
		return nil, errors.New("scrapyd: Store is required")
	case (cfg.Username == "") != (cfg.Password == ""):
		return nil, errors.New("scrapyd: set both Username and Password, or neither")
	case cfg.MaxUploadBytes < 0:
		return nil, errors.New("scrapyd: MaxUploadBytes is negative")
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.MaxUploadBytes == 0 {
		cfg.MaxUploadBytes = 51 << 20
	}
	if cfg.Items == nil && cfg.Pool != nil {
		cfg.Items = items.PostgresReader{Pool: cfg.Pool}
	}
	if cfg.NodeName == "" {
		cfg.NodeName = "crawlq"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, log: cfg.Logger}, nil
}

// endpoint is one .json endpoint: its api action and whether it takes POST only.
type endpoint struct {
	action string
	post   bool
}

var endpoints = map[string]endpoint{
	"/schedule.json":     {api.ActSchedule, true},
	"/cancel.json":       {api.ActCancel, true},
	"/status.json":       {api.ActStatus, false},
	"/listjobs.json":     {api.ActListJobs, false},
	"/listspiders.json":  {api.ActListSpiders, false},
	"/listprojects.json": {api.ActListProjects, false},
	"/listversions.json": {api.ActListVersions, false},
	"/addversion.json":   {api.ActAddVersion, true},
	"/delversion.json":   {api.ActDelVersion, true},
	"/delproject.json":   {api.ActDelProject, true},
	"/daemonstatus.json": {api.ActDaemonStatus, false},
}

// Handler returns the API as an http.Handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for path, ep := range endpoints {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { s.serveJSON(w, r, ep) })
	}
	mux.HandleFunc("GET /jobs", s.serveJobsPage)
	mux.HandleFunc("GET /logs/{project}/{spider}/{file}", s.serveLog)
	mux.HandleFunc("GET /items/{project}/{spider}/{file}", s.serveItems)
	mux.HandleFunc("GET /logs/stats.json", s.serveStats)
	for _, kind := range []string{"logs", "items"} {
		mux.HandleFunc("GET /"+kind+"/{$}", s.serveListing(kind))
		mux.HandleFunc("GET /"+kind+"/{project}/{$}", s.serveListing(kind))
		mux.HandleFunc("GET /"+kind+"/{project}/{spider}/{$}", s.serveListing(kind))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintln(w, "crawlq: Scrapyd-compatible API (schedule.json, listjobs.json, addversion.json, ...)")
			return
		}
		s.writeJSON(w, http.StatusNotFound, s.errBody("no such endpoint: "+clip(r.URL.Path)))
	})
	return s.auth(mux)
}

// auth requires HTTP basic auth when credentials are configured, as Scrapyd does.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.Username == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, isJSON := endpoints[r.URL.Path]; isJSON && r.Method == http.MethodOptions {
			// A browser's CORS preflight carries no credentials, and its answer holds no
			// data (serveJSON): it is answered without them, or no page could call the API.
			next.ServeHTTP(w, r)
			return
		}
		u, p, ok := r.BasicAuth()
		uok := subtle.ConstantTimeCompare([]byte(u), []byte(s.cfg.Username)) == 1
		pok := subtle.ConstantTimeCompare([]byte(p), []byte(s.cfg.Password)) == 1
		if !ok || !uok || !pok {
			w.Header().Set("WWW-Authenticate", `Basic realm="Scrapyd"`)
			s.writeJSON(w, http.StatusUnauthorized, s.errBody("unauthorized: wrong or missing credentials"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) errBody(msg string) map[string]any {
	return map[string]any{"node_name": s.cfg.NodeName, "status": "error", "message": msg}
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// form reads a request's parameters: the query string, and a urlencoded or multipart body.
func (s *Server) form(w http.ResponseWriter, r *http.Request) (map[string][]string, map[string][]byte, error) {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	files := map[string][]byte{}
	if ct == "multipart/form-data" {
		// Parts beyond 1 MiB spill to temporary files, removed below.
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			return nil, nil, err
		}
		defer r.MultipartForm.RemoveAll()
		for name, fhs := range r.MultipartForm.File {
			if len(fhs) == 0 {
				continue
			}
			f, err := fhs[0].Open()
			if err != nil {
				return nil, nil, err
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return nil, nil, err
			}
			files[name] = b
		}
	} else if err := r.ParseForm(); err != nil {
		return nil, nil, err
	}
	return r.Form, files, nil
}

// request builds the api request of an endpoint from its parameters.
func request(action string, form map[string][]string, files map[string][]byte) (*api.Request, error) {
	first := func(k string) string {
		if v := form[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	req := &api.Request{Action: action, Project: first("project"), Version: first("_version")}
	switch action {
	case api.ActSchedule:
		req.Spider = first("spider")
		if req.Spider == "" {
			return nil, errors.New("missing spider")
		}
		if req.Project == "" {
			return nil, errors.New("missing project (\"default\" holds the pushed spider specs)")
		}
		req.JobID = first("jobid")
		if p := first("priority"); p != "" {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || f != math.Trunc(f) || f < -1000 || f > 1000 {
				return nil, fmt.Errorf("priority %q: want an integer in -1000..1000", clip(p))
			}
			n := int(f)
			req.Priority = &n
		}
		if set := form["setting"]; len(set) > 0 {
			m, err := api.ParseScrapySettings(set)
			if err != nil {
				return nil, err
			}
			req.ScrapySettings = m
		}
		for k, v := range form {
			switch k {
			case "project", "spider", "_version", "jobid", "priority", "setting":
				continue
			}
			if req.Args == nil {
				req.Args = map[string]string{}
			}
			req.Args[k] = v[0] // Scrapyd takes the first value of a repeated argument
		}
	case api.ActCancel, api.ActStatus:
		job := first("job")
		if job == "" {
			return nil, errors.New("missing job")
		}
		if action == api.ActCancel {
			req.Signal = first("signal")
		}
		if id, err := strconv.ParseInt(job, 10, 64); err == nil && id > 0 {
			req.Job = id
		} else {
			req.JobRef = job
		}
	case api.ActListJobs:
		req.Spider = first("spider")
	case api.ActAddVersion:
		req.Version = first("version")
		req.Egg = files["egg"]
		if req.Egg == nil && first("egg") != "" {
			// Scrapyd takes the egg as a form value too: ScrapydWeb's Deploy posts it
			// urlencoded (requests' data={'egg': bytes}). A form value keeps its bytes.
			req.Egg = []byte(first("egg"))
		}
	case api.ActDelVersion:
		req.Version = first("version")
	}
	if action != api.ActSchedule && action != api.ActListSpiders {
		if v := first("_version"); v != "" {
			return nil, fmt.Errorf("%s does not take _version", action)
		}
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return req, nil
}

// cors sets the headers Scrapyd sets on every answer of its JSON API, so a page on another
// origin can call it.
func cors(w http.ResponseWriter, ep endpoint) {
	methods := "OPTIONS, HEAD, GET"
	if ep.post {
		methods = "OPTIONS, HEAD, POST"
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Access-Control-Allow-Methods", methods)
	w.Header().Set("Access-Control-Allow-Headers", "X-Requested-With")
	if ep.post {
		w.Header().Set("Allow", methods)
	}
}

func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request, ep endpoint) {
	cors(w, ep)
	if r.Method == http.MethodOptions {
		// A CORS preflight, answered as Scrapyd answers it: no body.
		w.Header().Set("Allow", w.Header().Get("Access-Control-Allow-Methods"))
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if ep.post && r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		s.writeJSON(w, http.StatusMethodNotAllowed, s.errBody(fmt.Sprintf("%s takes POST, not %s", strings.TrimPrefix(r.URL.Path, "/"), r.Method)))
		return
	}
	if !ep.post && r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodHead {
		s.writeJSON(w, http.StatusMethodNotAllowed, s.errBody("use GET"))
		return
	}
	form, files, err := s.form(w, r)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			s.writeJSON(w, http.StatusRequestEntityTooLarge, s.errBody(fmt.Sprintf("request body larger than %d bytes", mb.Limit)))
			return
		}
		s.writeJSON(w, http.StatusOK, s.errBody("malformed request: "+err.Error()))
		return
	}
	req, err := request(ep.action, form, files)
	if err != nil {
		s.writeJSON(w, http.StatusOK, s.errBody(strings.TrimPrefix(err.Error(), "bad request: ")))
		return
	}
	out := s.cfg.API.Run(r.Context(), req)
	if out["status"] != "ok" {
		msg, ok := out["message"].(string)
		if !ok {
			msg = fmt.Sprintf("api answered status %v without a message", out["status"])
		}
		if body := s.scrapydOK(ep.action, msg); body != nil {
			s.writeJSON(w, http.StatusOK, body)
			return
		}
		s.writeJSON(w, http.StatusOK, s.errBody(strings.TrimPrefix(msg, "bad request: ")))
		return
	}
	body, err := s.shape(ep.action, out)
	if err != nil {
		s.log.ErrorContext(r.Context(), "scrapyd: cannot shape the api's answer", "action", ep.action, "err", err)
		s.writeJSON(w, http.StatusInternalServerError, s.errBody("internal error: "+err.Error()))
		return
	}
	if ep.action == api.ActListProjects && !truthy(form["all"]) {
		body["projects"] = withoutDefault(body["projects"])
	}
	s.writeJSON(w, http.StatusOK, body)
}

// scrapydOK is Scrapyd's answer where the api's error is, for Scrapyd, an ordinary outcome: a
// job it does not know has currstate null; cancelling a job that is unknown or already finished
// answers ok with prevstate null (nothing was cancelled); listversions of an unknown project is
// an empty list. A job of another project than the one named stays an error. Nil: no such case.
func (s *Server) scrapydOK(action, msg string) map[string]any {
	ok := func(k string, v any) map[string]any {
		return map[string]any{"node_name": s.cfg.NodeName, "status": "ok", k: v}
	}
	unknownJob := strings.HasPrefix(msg, "unknown job") && !strings.Contains(msg, " in project ")
	switch {
	case action == api.ActStatus && strings.HasPrefix(msg, "unknown job"):
		return ok("currstate", nil)
	case action == api.ActCancel && (unknownJob || strings.Contains(msg, "already finished")):
		return ok("prevstate", nil)
	case action == api.ActListVersions && strings.HasPrefix(msg, "unknown project"):
		return ok("versions", []string{})
	}
	return nil
}

// truthy is a form flag: 1, true or yes.
func truthy(v []string) bool {
	return len(v) > 0 && (v[0] == "1" || strings.EqualFold(v[0], "true") || strings.EqualFold(v[0], "yes"))
}

// withoutDefault drops crawlq's own project of spec spiders from listprojects: Scrapyd clients
// act on every listed project (scrapyd-client's `schedule -p '*'`), which would start crawlq's
// built-in spiders. listprojects.json?all=1 lists it.
func withoutDefault(v any) any {
	ps, ok := v.([]string)
	if !ok {
		return v
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p != spiderstore.DefaultProject {
			out = append(out, p)
		}
	}
	return out
}

// scrapydTime formats a time as Scrapyd does (Python's str(datetime)).
func scrapydTime(rfc string) string {
	t, err := time.Parse(time.RFC3339Nano, rfc)
	if err != nil {
		return rfc
	}
	return t.Local().Format("2006-01-02 15:04:05.000000")
}

// shape turns an api response into Scrapyd's shape for the action. A field the action's
// response lacks, or holds in a type other than the api's, is an error rather than a null or a
// missing key in the answer: the two packages disagreeing must not look like an empty result.
func (s *Server) shape(action string, out api.Response) (map[string]any, error) {
	body := map[string]any{"node_name": s.cfg.NodeName, "status": "ok"}
	copyKeys := func(keys ...string) error {
		for _, k := range keys {
			v, ok := out[k]
			if !ok {
				return fmt.Errorf("scrapyd: %s response has no %q", action, k)
			}
			body[k] = v
		}
		return nil
	}
	switch action {
	case api.ActSchedule:
		return body, copyKeys("jobid")
	case api.ActCancel:
		return body, copyKeys("prevstate")
	case api.ActStatus:
		if err := copyKeys("currstate"); err != nil {
			return nil, err
		}
		if v, ok := out["job"]; ok {
			j, ok := v.(api.Job)
			if !ok {
				return nil, fmt.Errorf("scrapyd: status response's job is a %T, want api.Job", v)
			}
			body["job"] = jobShape(j, "")
		}
	case api.ActListJobs:
		for _, k := range []string{"pending", "running", "finished"} {
			jobs, ok := out[k].([]api.Job)
			if !ok {
				return nil, fmt.Errorf("scrapyd: listjobs response's %s is a %T, want []api.Job", k, out[k])
			}
			list := make([]map[string]any, 0, len(jobs))
			for _, j := range jobs {
				list = append(list, jobShape(j, k))
			}
			body[k] = list
		}
	case api.ActListSpiders:
		return body, copyKeys("spiders")
	case api.ActListProjects:
		return body, copyKeys("projects")
	case api.ActListVersions:
		return body, copyKeys("versions")
	case api.ActAddVersion:
		return body, copyKeys("project", "version", "spiders")
	case api.ActDaemonStatus:
		return body, copyKeys("pending", "running", "finished", "jobs_pending", "jobs_running")
	}
	return body, nil
}

// jobShape is a job as Scrapyd's listjobs shows it, with crawlq's state, items and error, and,
// once crawlq knows them, its outcome, monitors' verdict and dead pages.
func jobShape(j api.Job, group string) map[string]any {
	m := map[string]any{"id": j.ID, "project": j.Project, "spider": j.Spider, "state": j.State, "items": j.Items,
		"log_url": j.LogURL, "items_url": j.ItemsURL, "stats": j.Stats}
	if j.Version != "" {
		m["version"] = j.Version
	}
	if j.PID != 0 {
		m["pid"] = j.PID
	}
	if j.StartTime != "" {
		m["start_time"] = scrapydTime(j.StartTime)
	}
	if j.EndTime != "" {
		m["end_time"] = scrapydTime(j.EndTime)
	}
	if j.Error != "" {
		m["error"] = j.Error
	}
	if j.Outcome != "" {
		m["outcome"] = j.Outcome
	}
	if j.Monitors != "" {
		m["monitors"] = j.Monitors
	}
	if j.StartTime != "" {
		m["dead_pages"] = j.DeadPages
	}
	if group == "pending" {
		// Scrapyd 1.5 shows a pending job's pinned version (null when none), Scrapy settings
		// and arguments.
		m["version"] = nil
		if j.Version != "" {
			m["version"] = j.Version
		}
		set := j.ScrapySettings
		if set == nil {
			set = map[string]string{}
		}
		m["settings"], m["args"] = set, j.Args
	}
	return m
}

// runOf resolves the job of a /logs or /items path ("<job>.log") to a run id.
func (s *Server) runOf(ctx context.Context, file, ext string) (int64, error) {
	job, ok := strings.CutSuffix(file, ext)
	if !ok || job == "" {
		return 0, &badPath{fmt.Sprintf("want <job>%s", ext)}
	}
	if id, err := strconv.ParseInt(job, 10, 64); err == nil && id > 0 {
		return id, nil
	}
	id, err := s.cfg.Store.JobIDTaken(ctx, job)
	if err != nil {
		return 0, err
	}
	if id == 0 {
		return 0, &badPath{fmt.Sprintf("unknown job %q", clip(job))}
	}
	return id, nil
}

func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

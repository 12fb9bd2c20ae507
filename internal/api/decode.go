package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"crawlq/internal/crawl"
	"crawlq/internal/spiderstore"
)

// Limits on a request.
const (
	// MaxRequestBytes bounds a whole request (Lambda's own async limit is 256 KiB), but addversion.
	MaxRequestBytes = 256 << 10
	// MaxAddVersionBytes bounds an addversion request (Lambda's synchronous limit is 6 MB).
	MaxAddVersionBytes = 6 << 20
	// MaxArgs and MaxArgsBytes bound a run's spider arguments.
	MaxArgs      = 100
	MaxArgsBytes = 64 << 10
	// MaxDelay bounds delay_seconds and how far ahead "at" may be.
	MaxDelay = 366 * 24 * time.Hour
	// MaxNameLen bounds spider, key and schedule names.
	MaxNameLen = 256
)

// Actions the api understands.
const (
	ActSchedule      = "schedule"
	ActCancel        = "cancel"
	ActStatus        = "status"
	ActListJobs      = "listjobs"
	ActListSpiders   = "listspiders"
	ActDaemonStatus  = "daemonstatus"
	ActAddSchedule   = "addschedule"
	ActListSchedules = "listschedules"
	ActDelSchedule   = "delschedule"
	ActListProjects  = "listprojects"
	ActListVersions  = "listversions"
	ActAddVersion    = "addversion"
	ActDelVersion    = "delversion"
	ActDelProject    = "delproject"
	ActPushSpider    = "pushspider"
	ActDelSpider     = "delspider"
	// ActRedrive retries a finished run's dead pages and reopens it (crawlq redrive --run).
	ActRedrive = "redrive"
	// ActListChanges lists a run's new, changed and gone items (crawlq items ID --changes).
	ActListChanges = "listchanges"
)

var actions = []string{ActSchedule, ActCancel, ActStatus, ActListJobs, ActListSpiders, ActDaemonStatus,
	ActAddSchedule, ActListSchedules, ActDelSchedule, ActListProjects, ActListVersions, ActAddVersion,
	ActDelVersion, ActDelProject, ActPushSpider, ActDelSpider, ActRedrive, ActListChanges}

// ErrBadRequest wraps every decoding or validation failure: nothing was written.
var ErrBadRequest = errors.New("bad request")

// Request is one decoded api call. Which fields an action reads is in fields below and in the
// docs/api.md's reference of the actions (reference_test.go keeps the two in step); a field an action
// does not use is rejected, so a typo never silently does nothing.
type Request struct {
	Action string `json:"action"`
	// Project is accepted (and ignored) for Scrapyd clients, which always send it.
	Project string `json:"project,omitempty"`

	Spider   string            `json:"spider,omitempty"`
	Args     map[string]string `json:"args,omitempty"`
	Settings *crawl.Overrides  `json:"settings,omitempty"`
	Priority *int              `json:"priority,omitempty"`
	// DelaySeconds or At postpone a run (not both). At is RFC 3339.
	DelaySeconds *float64 `json:"delay_seconds,omitempty"`
	At           string   `json:"at,omitempty"`
	// UniqueKey makes schedule idempotent (Scrapyd has none; "idempotency_key" is an alias).
	UniqueKey string `json:"unique_key,omitempty"`
	Replace   bool   `json:"replace,omitempty"`

	// Job is a run id (cancel, status, redrive, listchanges), as a string like Scrapyd's jobid or a number; JobRef is
	// a job given by the jobid the client chose at schedule (not a number).
	Job    int64  `json:"-"`
	JobRef string `json:"-"`
	// JobID is the client's own id for a new run (schedule; Scrapyd's jobid).
	JobID string `json:"-"`
	// Signal is what a cancel sends the run's command (Scrapyd's cancel.json signal: INT, TERM,
	// KILL... or a number; spiderstore.ParseCancelSignal). Default: SIGINT to a Scrapy run.
	Signal string `json:"signal,omitempty"`
	// Version pins a spider or project version (schedule, listspiders; Scrapyd's _version) or
	// names one (addversion, delversion, pushspider, delspider).
	Version string `json:"version,omitempty"`
	// ScrapySettings are Scrapy settings for a run ("setting": ["NAME=VALUE", ...]).
	ScrapySettings map[string]string `json:"-"`
	// Egg is a Scrapy project egg, base64 in JSON (addversion).
	Egg []byte `json:"egg,omitempty"`
	// Spec is a spider spec, YAML or JSON text (pushspider).
	Spec string `json:"spec,omitempty"`

	// Limit and State filter listjobs; Limit is also listchanges' page.
	Limit int `json:"limit,omitempty"`
	// After is where listchanges goes on: the next of its last answer.
	After string `json:"after,omitempty"`
	Name  string `json:"name,omitempty"` // schedule name (addschedule, delschedule)
	// Cron is a 5-field cron expression, an @daily-style descriptor, or an EventBridge
	// cron(...) / rate(...) expression; Timezone is an IANA name (default UTC).
	Cron     string `json:"cron,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Source is set by EventBridge ticks ({"source":"schedule"}); the api ignores it.
	Source string `json:"source,omitempty"`
}

// wire is what is read off the wire: aliases and loosely typed fields that Decode folds into
// Request.
type wire struct {
	Request
	Setting        json.RawMessage `json:"setting,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	JobRaw         json.RawMessage `json:"job,omitempty"`
	JobIDRaw       json.RawMessage `json:"jobid,omitempty"`
	UVersion       string          `json:"_version,omitempty"`
}

// fields lists, per action, the fields it accepts besides action, project and source.
var fields = map[string][]string{
	ActSchedule:      {"spider", "args", "settings", "priority", "delay_seconds", "at", "unique_key", "replace", "jobid", "version"},
	ActCancel:        {"job", "signal"},
	ActStatus:        {"job"},
	ActListJobs:      {"spider", "limit"},
	ActListSpiders:   {"version"},
	ActListProjects:  {},
	ActListVersions:  {},
	ActAddVersion:    {"version", "egg"},
	ActDelVersion:    {"version"},
	ActDelProject:    {},
	ActPushSpider:    {"spec", "version"},
	ActDelSpider:     {"spider", "version"},
	ActDaemonStatus:  {},
	ActAddSchedule:   {"name", "spider", "args", "settings", "priority", "cron", "timezone", "unique_key", "replace", "version"},
	ActListSchedules: {},
	ActDelSchedule:   {"name"},
	ActRedrive:       {"job"},
	ActListChanges:   {"job", "limit", "after"},
}

// aliases are other names of fields, for Scrapyd's clients and older requests: alias -> field.
var aliases = map[string]string{"setting": "settings", "idempotency_key": "unique_key", "jobid": "job", "_version": "version"}

// Decode reads and validates a request without touching anything: size, JSON syntax, field
// types, unknown fields, the action, and each field's range. It never panics; every error
// wraps ErrBadRequest with a message meant for the caller.
func Decode(data []byte) (*Request, error) {
	if err := checkEnvelope(data); err != nil {
		return nil, err
	}
	keys, w, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	r := &w.Request
	if err := checkAction(r, len(data)); err != nil {
		return nil, err
	}
	if err := checkKeys(r.Action, keys); err != nil {
		return nil, err
	}
	if err := mergeAliases(w, r); err != nil {
		return nil, err
	}
	if err := resolveJob(w, r); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// checkEnvelope checks what can be checked before parsing: size, emptiness, encoding.
func checkEnvelope(data []byte) error {
	if len(data) > MaxAddVersionBytes {
		return badf("request is %d bytes; the limit is %d", len(data), MaxAddVersionBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return badf("empty request: send a JSON object such as {\"action\":\"listspiders\"}")
	}
	if !utf8.Valid(data) {
		return badf("request is not valid UTF-8")
	}
	return nil
}

// decodeObject parses data twice: once for the keys present (so that unused fields can be
// named), once strictly into the wire form (unknown fields and trailing data refused).
func decodeObject(data []byte) (map[string]json.RawMessage, *wire, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, nil, jsonErr(err)
	}
	if keys == nil {
		return nil, nil, badf("request must be a JSON object, not null")
	}
	if raw := bytes.TrimSpace(keys["settings"]); len(raw) > 0 && raw[0] == '{' {
		// Checked here for its errors, which name the setting (settings.delay) and the one
		// nearest a typo; the strict decode below would say only "unknown field".
		if _, err := crawl.DecodeOverrides(raw, "settings"); err != nil {
			return nil, nil, badf("%v", err)
		}
	}
	var w wire
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, nil, jsonErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, badf("unexpected data after the JSON object")
	}
	return keys, &w, nil
}

// checkAction requires a known action, and the smaller size limit of every action but
// addversion.
func checkAction(r *Request, size int) error {
	r.Action = strings.TrimSpace(r.Action)
	if r.Action == "" {
		return badf("missing action: want one of %s", strings.Join(actions, ", "))
	}
	if _, ok := fields[r.Action]; !ok {
		return badf("unknown action %q: want one of %s", clip(r.Action), strings.Join(actions, ", "))
	}
	if r.Action != ActAddVersion && size > MaxRequestBytes {
		return badf("request is %d bytes; the limit is %d", size, MaxRequestBytes)
	}
	return nil
}

// checkKeys refuses a field (or alias) the action does not take.
func checkKeys(action string, keys map[string]json.RawMessage) error {
	allowed := fields[action]
	for k := range keys {
		if k == "action" || k == "project" || k == "source" {
			continue
		}
		name := k
		if a, ok := aliases[k]; ok && !(k == "jobid" && action == ActSchedule) {
			name = a // (schedule's jobid is the new run's id, chosen by the client)
		}
		if !slices.Contains(allowed, name) {
			return badf("action %s does not take %q", action, k)
		}
	}
	return nil
}

// mergeAliases moves setting, _version and idempotency_key into their fields, refusing a field
// given under both names.
func mergeAliases(w *wire, r *Request) error {
	if len(w.Setting) > 0 && string(w.Setting) != "null" {
		if r.Settings != nil {
			return badf("give settings or setting, not both")
		}
		if err := decodeSetting(w.Setting, r); err != nil {
			return err
		}
	}
	if w.UVersion != "" {
		if r.Version != "" {
			return badf("give version or _version, not both")
		}
		r.Version = w.UVersion
	}
	if w.IdempotencyKey != "" {
		if r.UniqueKey != "" {
			return badf("give unique_key or idempotency_key, not both")
		}
		r.UniqueKey = w.IdempotencyKey
	}
	return nil
}

// resolveJob reads the run a request names: schedule's jobid is the new run's id, chosen by the
// client; cancel, status and redrive name an existing run by job (or its alias jobid).
func resolveJob(w *wire, r *Request) error {
	jobRaw := w.JobRaw
	if r.Action == ActSchedule && len(w.JobIDRaw) > 0 {
		if err := json.Unmarshal(w.JobIDRaw, &r.JobID); err != nil {
			return badf("field jobid: want a string")
		}
		if err := checkJobID(r.JobID); err != nil { // "" too: given, but empty
			return err
		}
	} else if len(w.JobIDRaw) > 0 {
		if len(jobRaw) > 0 {
			return badf("give job or jobid, not both")
		}
		jobRaw = w.JobIDRaw
	}
	if r.Action == ActCancel || r.Action == ActStatus || r.Action == ActRedrive || r.Action == ActListChanges {
		id, ref, err := parseJob(jobRaw)
		if err != nil {
			return err
		}
		r.Job, r.JobRef = id, ref
	}
	return nil
}

// Validate checks a request's fields (Decode calls it; the Scrapyd HTTP API, which builds
// requests from forms, too), reporting the first mistake.
func (r *Request) Validate() error {
	if _, ok := fields[r.Action]; !ok {
		return badf("unknown action %q: want one of %s", clip(r.Action), strings.Join(actions, ", "))
	}
	for _, check := range []func() error{r.checkSpiderArgs, r.checkRunOptions, r.checkLimit, r.checkScheduleName,
		r.checkProject, r.checkRequired} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkSpiderArgs bounds the spider's name and its arguments.
func (r *Request) checkSpiderArgs() error {
	if len(r.Spider) > MaxNameLen {
		return badf("spider name longer than %d bytes", MaxNameLen)
	}
	if (r.Action == ActSchedule || r.Action == ActAddSchedule) && strings.TrimSpace(r.Spider) == "" {
		return badf("missing spider: name the spider to run (see listspiders)")
	}
	if len(r.Args) > MaxArgs {
		return badf("args has %d entries; the limit is %d", len(r.Args), MaxArgs)
	}
	n := 0
	for k, v := range r.Args {
		if k == "" {
			return badf("args: empty argument name")
		}
		n += len(k) + len(v)
	}
	if n > MaxArgsBytes {
		return badf("args are %d bytes; the limit is %d", n, MaxArgsBytes)
	}
	return nil
}

// checkRunOptions checks how a run is to be started and stopped: priority, cancel signal, the
// client's jobid, when, and its idempotency key.
func (r *Request) checkRunOptions() error {
	if r.Priority != nil && (*r.Priority < -1000 || *r.Priority > 1000) {
		return badf("priority %d out of range: want -1000..1000", *r.Priority)
	}
	if _, err := spiderstore.ParseCancelSignal(r.Signal); err != nil {
		return badf("%s", strings.TrimPrefix(err.Error(), spiderstore.ErrInvalid.Error()+": "))
	}
	// Checked here, not only where JSON is decoded: the Scrapyd HTTP API builds its Request from a
	// form, and a jobid of digits there would name another run to status and cancel.
	if r.JobID != "" {
		if err := checkJobID(r.JobID); err != nil {
			return err
		}
	}
	if err := r.checkWhen(); err != nil {
		return err
	}
	if len(r.UniqueKey) > MaxNameLen {
		return badf("unique_key longer than %d bytes", MaxNameLen)
	}
	return nil
}

// checkWhen bounds delay_seconds and at, of which a request gives at most one.
func (r *Request) checkWhen() error {
	if r.DelaySeconds != nil {
		d := *r.DelaySeconds
		if math.IsNaN(d) || d < 0 || d > MaxDelay.Seconds() {
			return badf("delay_seconds %v out of range: want 0..%d", d, int64(MaxDelay.Seconds()))
		}
		if r.At != "" {
			return badf("give delay_seconds or at, not both")
		}
	}
	if r.At != "" {
		// How far ahead it may be is checked against the API's clock when the run is scheduled
		// (scheduleParams): Validate reads no clock.
		if _, err := time.Parse(time.RFC3339, r.At); err != nil {
			return badf("at %q: want an RFC 3339 time such as 2030-01-02T15:04:05Z", clip(r.At))
		}
	}
	return nil
}

// checkLimit bounds a listing's page.
func (r *Request) checkLimit() error {
	if r.Limit < 0 || r.Limit > 1000 {
		return badf("limit %d out of range: want 1..1000 (0 means 100)", r.Limit)
	}
	return nil
}

// checkScheduleName requires delschedule's name and checks any schedule name's spelling.
func (r *Request) checkScheduleName() error {
	if r.Action == ActDelSchedule && r.Name == "" {
		return badf("missing name: the schedule to delete (see listschedules)")
	}
	if r.Name != "" && !validScheduleName(r.Name) {
		return badf("schedule name %q: want 1-64 of A-Z a-z 0-9 - _ .", clip(r.Name))
	}
	return nil
}

// checkProject requires the project, version and egg of the project actions.
func (r *Request) checkProject() error {
	if len(r.Version) > MaxNameLen || len(r.Project) > MaxNameLen {
		return badf("version or project longer than %d bytes", MaxNameLen)
	}
	switch r.Action {
	case ActListVersions, ActAddVersion, ActDelVersion, ActDelProject:
		if r.Project == "" {
			return badf("missing project")
		}
	}
	switch r.Action {
	case ActAddVersion, ActDelVersion:
		if r.Version == "" {
			return badf("missing version")
		}
	}
	if r.Action == ActAddVersion && len(r.Egg) == 0 {
		return badf("missing egg: the project's egg, base64-encoded")
	}
	return nil
}

// checkRequired requires what the spider and schedule actions act on, and bounds cron and
// timezone.
func (r *Request) checkRequired() error {
	if r.Action == ActPushSpider && strings.TrimSpace(r.Spec) == "" {
		return badf("missing spec: a spider spec, YAML or JSON text")
	}
	if r.Action == ActDelSpider && r.Spider == "" {
		return badf("missing spider")
	}
	if r.Action == ActAddSchedule && strings.TrimSpace(r.Cron) == "" {
		return badf("missing cron: a cron expression such as \"0 3 * * *\"")
	}
	if len(r.Cron) > MaxNameLen || len(r.Timezone) > MaxNameLen {
		return badf("cron or timezone longer than %d bytes", MaxNameLen)
	}
	return nil
}

// parseJob reads a job: a run id (a number or a string of digits), or else the jobid a client
// chose at schedule (returned as ref).
func parseJob(raw json.RawMessage) (int64, string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, "", badf("missing job: the jobid that schedule returned")
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, "", badf("job: %v", err)
		}
		if validJobID(s) {
			return 0, s, nil
		}
	} else {
		s = string(raw)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || id <= 0 {
		return 0, "", badf("job %q: want a positive run id such as \"42\", or the jobid given at schedule", clip(s))
	}
	return id, "", nil
}

// checkJobID is validJobID's answer as the error a client gets.
func checkJobID(s string) error {
	if !validJobID(s) {
		return badf("jobid %q: want 1-128 of A-Z a-z 0-9 - _ . : not all digits", clip(s))
	}
	return nil
}

// validJobID accepts a client's job id: Scrapyd's are 32 hex digits; crawlq takes any 1-128 of
// A-Z a-z 0-9 - _ . : that is not all digits (those are run ids).
func validJobID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	digits := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
		digits = digits && c >= '0' && c <= '9'
	}
	return !digits
}

// decodeSetting reads "setting": an object of crawlq settings (as "settings"), or Scrapyd's list
// of "NAME=VALUE" Scrapy settings.
func decodeSetting(raw json.RawMessage, r *Request) error {
	if raw[0] == '{' {
		o, err := crawl.DecodeOverrides(raw, "setting")
		if err != nil {
			return badf("%v", err)
		}
		r.Settings = &o
		return nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return badf("field setting: want a list of \"NAME=VALUE\" Scrapy settings or an object of crawlq settings")
	}
	set, err := ParseScrapySettings(list)
	if err != nil {
		return err
	}
	r.ScrapySettings = set
	return nil
}

// ParseScrapySettings reads Scrapyd's setting=NAME=VALUE values.
func ParseScrapySettings(list []string) (map[string]string, error) {
	if len(list) > MaxArgs {
		return nil, badf("setting has %d entries; the limit is %d", len(list), MaxArgs)
	}
	out := make(map[string]string, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !scrapySettingRE(k) {
			return nil, badf("setting %q: want NAME=VALUE with NAME of A-Z 0-9 _ (a Scrapy setting such as DOWNLOAD_DELAY=2)", clip(kv))
		}
		switch k {
		case "STATS_CLASS", "FEEDS", "FEED_URI", "FEED_FORMAT":
			return nil, badf("setting %s: crawlq sets it to collect the run's items and stats", k)
		}
		out[k] = v
	}
	return out, nil
}

func scrapySettingRE(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for _, c := range k {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func validScheduleName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func jsonErr(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var be base64.CorruptInputError
	switch {
	case errors.As(err, &be):
		return badf("field egg: want the egg base64-encoded (%v)", err)
	case errors.As(err, &se):
		return badf("malformed JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		field := strings.TrimPrefix(te.Field, "Request.")
		if field == "" {
			return badf("request must be a JSON object, not %s", te.Value)
		}
		return badf("field %s: got %s, want %s", field, te.Value, typeName(te.Type.String()))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badf("malformed JSON: unexpected end of input")
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return badf("unknown field %s", strings.TrimPrefix(msg, "json: unknown field "))
	}
	return badf("malformed request: %s", strings.TrimPrefix(msg, "json: "))
}

func typeName(t string) string {
	switch {
	case strings.HasPrefix(t, "map["):
		return "an object of strings"
	case strings.Contains(t, "int"):
		return "an integer"
	case strings.Contains(t, "float"):
		return "a number"
	case t == "string" || t == "*string":
		return "a string"
	case strings.Contains(t, "bool"):
		return "true or false"
	case strings.Contains(t, "Overrides"):
		return "an object"
	}
	return t
}

func badf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, a...))
}

// clip shortens user input echoed in messages.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

package scrapyd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"crawlq/internal/api"
	"crawlq/internal/runlog"
)

// Scrapyd serves logs_dir and items_dir as Twisted static files: a run's log and items, and a
// directory listing at every level (/logs/, /logs/P/, /logs/P/S/). ScrapydWeb's Logs and Items
// pages read those listings, and its Stats page reads what LogParser writes beside the logs
// (/logs/P/S/JOB.json and /logs/stats.json). crawlq has no such directories: the listings and
// the LogParser JSON are made from the runs, the log from the run log store, the items from the
// Postgres item sink.

// pyTime is Python's '%Y-%m-%d %H:%M:%S', the format of Scrapy's log lines, of Scrapyd's jobs page
// and of LogParser's times.
const pyTime = "2006-01-02 15:04:05"

// jobOf resolves the job of a /logs or /items path (<job><ext>) and checks that the path's
// project and spider are the job's: a wrong one is a missing file, as under Scrapyd's logs_dir.
func (s *Server) jobOf(ctx context.Context, r *http.Request, ext string) (api.Job, error) {
	id, err := s.runOf(ctx, r.PathValue("file"), ext)
	if err != nil {
		return api.Job{}, err
	}
	j, err := s.job(ctx, id)
	if err != nil {
		return api.Job{}, err
	}
	if project, sp := r.PathValue("project"), r.PathValue("spider"); j.Project != project || j.Spider != sp {
		return api.Job{}, &badPath{fmt.Sprintf("no job %s of spider %q in project %q", clip(j.ID), clip(sp), clip(project))}
	}
	return j, nil
}

// errNoJob is a job the api does not know (a missing file); other errors are the server's.
var errNoJob = errors.New("unknown job")

// job reads one run as the api shows it.
func (s *Server) job(ctx context.Context, id int64) (api.Job, error) {
	out := s.cfg.API.Run(ctx, &api.Request{Action: api.ActStatus, Job: id})
	if out["status"] != "ok" {
		msg, _ := out["message"].(string)
		if strings.HasPrefix(msg, "unknown job") {
			return api.Job{}, fmt.Errorf("%w %d", errNoJob, id)
		}
		return api.Job{}, fmt.Errorf("read job %d: %s", id, msg)
	}
	j, ok := out["job"].(api.Job)
	if !ok {
		return api.Job{}, fmt.Errorf("read job %d: the api answered a %T, want api.Job", id, out["job"])
	}
	return j, nil
}

// fileError answers a failed lookup: 404 for what does not exist, 500 for the server's errors.
func (s *Server) fileError(w http.ResponseWriter, r *http.Request, err error) {
	var bad *badPath
	if errors.Is(err, errNoJob) || errors.As(err, &bad) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	s.log.ErrorContext(r.Context(), "scrapyd: serve file", "path", r.URL.Path, "err", err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// badPath is a /logs or /items path that names no file.
type badPath struct{ msg string }

func (e *badPath) Error() string { return e.msg }

// logLine is a stored run log line as Scrapy's log has it: the command's own output byte for
// byte (Scrapy's lines carry their time), and crawlq's lines in Scrapy's format
// ("2006-01-02 15:04:05 [crawlq] INFO: ...") so LogParser and ScrapydWeb read them as log
// entries rather than as the continuation of the line before.
func logLine(l runlog.Line) string {
	if rest, ok := strings.CutPrefix(l.Text, runlog.OwnPrefix); ok {
		return l.At.Local().Format(pyTime) + " [crawlq] INFO: " + rest
	}
	return l.Text
}

func (s *Server) serveLog(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.PathValue("file"), ".json") {
		s.serveLogParserJob(w, r)
		return
	}
	if s.cfg.RunLog == nil {
		http.Error(w, "run logs are not configured", http.StatusNotFound)
		return
	}
	j, err := s.jobOf(r.Context(), r, ".log")
	if err != nil {
		s.fileError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	// The log goes out in the store's batches (1000 lines of at most 8 KiB each): memory is
	// bounded by one batch whatever the log's length.
	cur := ""
	var buf []byte
	for {
		lines, next, err := s.cfg.RunLog.Read(r.Context(), j.RunID, cur)
		if err != nil {
			// The status line is gone: the client sees a log that ends with this line, and
			// crawlq's log says so too.
			s.log.ErrorContext(r.Context(), "scrapyd: read run log", "run", j.RunID, "err", err)
			fmt.Fprintf(w, "%s [crawlq] ERROR: reading the rest of this log failed: %v\n", s.cfg.Clock.Now().Format(pyTime), err)
			return
		}
		buf = buf[:0]
		for _, l := range lines {
			buf = append(buf, logLine(l)...)
			buf = append(buf, '\n')
		}
		if _, err := w.Write(buf); err != nil {
			return // the client went away
		}
		if len(lines) == 0 || next == cur {
			return
		}
		cur = next
	}
}

func (s *Server) serveItems(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Items == nil {
		http.Error(w, "no item store is configured here", http.StatusNotFound)
		return
	}
	j, err := s.jobOf(r.Context(), r, ".jl")
	if err != nil {
		s.fileError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	cw := &countingWriter{w: w}
	sent, err := s.cfg.Items.WriteRun(r.Context(), cw, j.RunID)
	if err == nil || cw.err != nil || r.Context().Err() != nil {
		return // done, or the client went away (or its answer is full: ServeFunctionURL)
	}
	if cw.n == 0 {
		w.Header().Del("Content-Type")
		s.fileError(w, r, err)
		return
	}
	// The status line is gone: cut the connection so the client sees a broken transfer, not a
	// complete file that lacks items.
	s.log.ErrorContext(r.Context(), "scrapyd: items cut short", "run", j.RunID, "sent", sent, "err", err)
	panic(http.ErrAbortHandler)
}

// countingWriter counts what reached the client, to tell an error before the answer began
// from one midway.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error // the client's side failed
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}

// dirEntry is one row of a directory listing.
type dirEntry struct {
	name     string // a directory's ends with "/"
	size     string
	modified time.Time
	ctype    string
}

// listing writes a directory listing as Scrapyd's Twisted static.File writes one (Scrapyd's
// DirectoryLister, with its Last modified column): ScrapydWeb finds "Directory listing for
// /logs/" and reads each `<tr class="odd|even">` row's five cells.
func listing(w http.ResponseWriter, r *http.Request, entries []dirEntry) {
	slices.SortFunc(entries, func(a, b dirEntry) int {
		ad, bd := strings.HasSuffix(a.name, "/"), strings.HasSuffix(b.name, "/")
		switch {
		case ad && !bd:
			return -1
		case bd && !ad:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	header := "Directory listing for " + html.EscapeString(r.URL.Path)
	var b strings.Builder
	fmt.Fprintf(&b, `<html>
<head>
<title>%s</title>
</head>

<body>
<h1>%s</h1>

<table>
    <thead>
        <tr>
            <th>Filename</th>
            <th>Size</th>
            <th>Last modified</th>
            <th>Content type</th>
            <th>Content encoding</th>
        </tr>
    </thead>
    <tbody>
`, header, header)
	for i, e := range entries {
		class := "odd"
		if i%2 == 1 {
			class = "even"
		}
		href := url.PathEscape(strings.TrimSuffix(e.name, "/"))
		if strings.HasSuffix(e.name, "/") {
			href += "/"
		}
		mod := ""
		if !e.modified.IsZero() {
			mod = e.modified.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(&b, `<tr class="%s">
    <td><a href="%s">%s</a></td>
    <td>%s</td>
    <td>%s</td>
    <td>[%s]</td>
    <td></td>
</tr>
`, class, href, html.EscapeString(e.name), e.size, mod, e.ctype)
	}
	b.WriteString("    </tbody>\n</table>\n\n</body>\n</html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, b.String())
}

// listingJobs are the jobs a listing shows: those that started (Scrapyd writes a job's log and
// items once it runs), newest first, up to 1000 running and 1000 finished (listjobs' bound).
func (s *Server) listingJobs(ctx context.Context, project, sp string) ([]api.Job, error) {
	out := s.cfg.API.Run(ctx, &api.Request{Action: api.ActListJobs, Project: project, Spider: sp, Limit: 1000})
	if out["status"] != "ok" {
		msg, _ := out["message"].(string)
		if strings.HasPrefix(msg, "unknown ") {
			return nil, &badPath{msg}
		}
		return nil, fmt.Errorf("list jobs: %s", msg)
	}
	var jobs []api.Job
	for _, k := range []string{"running", "finished"} {
		js, ok := out[k].([]api.Job)
		if !ok {
			return nil, fmt.Errorf("list jobs: %s is a %T, want []api.Job", k, out[k])
		}
		jobs = append(jobs, js...)
	}
	return jobs, nil
}

// lastTime is when a job last changed: its end, else its start.
func lastTime(j api.Job) time.Time {
	for _, v := range []string{j.EndTime, j.StartTime} {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return time.Time{}
}

// serveListing answers /logs/..., /items/... directory paths: the projects with started jobs,
// a project's spiders with started jobs, or a spider's job files.
func (s *Server) serveListing(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if kind == "items" && s.cfg.Items == nil {
			http.Error(w, "no item store is configured here", http.StatusNotFound)
			return
		}
		if kind == "logs" && s.cfg.RunLog == nil {
			http.Error(w, "run logs are not configured", http.StatusNotFound)
			return
		}
		project, sp := r.PathValue("project"), r.PathValue("spider")
		jobs, err := s.listingJobs(r.Context(), project, sp)
		if err != nil {
			s.fileError(w, r, err)
			return
		}
		dirs := map[string]time.Time{}
		var entries []dirEntry
		for _, j := range jobs {
			t := lastTime(j)
			switch {
			case project == "":
				if t.After(dirs[j.Project]) || dirs[j.Project].IsZero() {
					dirs[j.Project] = t
				}
			case sp == "":
				if t.After(dirs[j.Spider]) || dirs[j.Spider].IsZero() {
					dirs[j.Spider] = t
				}
			case kind == "logs":
				entries = append(entries, dirEntry{name: j.ID + ".log", modified: t, ctype: "text/plain"},
					dirEntry{name: j.ID + ".json", modified: t, ctype: "application/json"})
			default:
				entries = append(entries, dirEntry{name: j.ID + ".jl", size: strconv.FormatInt(j.Items, 10) + " items", modified: t, ctype: "text/plain"})
			}
		}
		for name, t := range dirs {
			entries = append(entries, dirEntry{name: name + "/", modified: t, ctype: "Directory"})
		}
		if project == "" && kind == "logs" {
			entries = append(entries, dirEntry{name: "stats.json", modified: s.cfg.Clock.Now(), ctype: "application/json"})
		}
		listing(w, r, entries)
	}
}

// logParserVersion is the LogParser release whose output crawlq writes: ScrapydWeb takes its
// stats only when logparser_version equals the LogParser it has installed (0.8.4, the release
// ScrapydWeb 1.6 requires).
const logParserVersion = "0.8.4"

const na = "N/A" // LogParser's value for what it did not find

// pyDuration formats d as Python's str(timedelta) does for durations under a day: H:MM:SS.
func pyDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	sec := int64(d / time.Second)
	days, sec := sec/86400, sec%86400
	s := fmt.Sprintf("%d:%02d:%02d", sec/3600, sec/60%60, sec%60)
	if days == 1 {
		return "1 day, " + s
	} else if days > 1 {
		return fmt.Sprintf("%d days, %s", days, s)
	}
	return s
}

// finishReason is Scrapy's finish_reason for how a run ended: "finished" for a run that
// succeeded, "shutdown" for a cancelled one (Scrapy's reason when a signal stops it), "failed"
// for a failed one, N/A while it runs.
func finishReason(j api.Job) string {
	switch j.State {
	case "succeeded":
		return "finished"
	case "cancelled":
		return "shutdown"
	case "failed":
		return "failed"
	}
	return na
}

// logParserJob is a run as LogParser's parse() reports a log (its keys, in its order), from the
// figures crawlq keeps for every run rather than from the log's text: pages and items are the
// run's counts, first and latest log time its start and end (or now), error_logs and
// retry_logs the run's errors and retries. What only the log's text has (the latest matching
// lines, the telnet console) is empty, and crawler_stats holds crawlq's figures under Scrapy's
// stat names with source "crawlq".
func (s *Server) logParserJob(j api.Job, host string, now time.Time) map[string]any {
	d := map[string]any{
		"log_path": "", "json_path": "", "json_url": "http://" + host + strings.TrimSuffix(j.LogURL, ".log") + ".json",
		"size": 0, "position": 0, "status": "ok", "_head": "",
	}
	start, _ := time.Parse(time.RFC3339Nano, j.StartTime)
	end, endErr := time.Parse(time.RFC3339Nano, j.EndTime)
	if endErr != nil {
		end = now
	}
	if j.StartTime == "" {
		d["first_log_time"], d["latest_log_time"], d["runtime"] = na, na, na
		d["first_log_timestamp"], d["latest_log_timestamp"] = 0, 0
	} else {
		d["first_log_time"], d["latest_log_time"] = start.Local().Format(pyTime), end.Local().Format(pyTime)
		d["runtime"] = pyDuration(end.Truncate(time.Second).Sub(start.Truncate(time.Second)))
		d["first_log_timestamp"], d["latest_log_timestamp"] = start.Unix(), end.Unix()
	}
	pages, items := j.Stats.Pages, j.Items
	if j.StartTime == "" {
		d["datas"], d["pages"], d["items"] = []any{}, nil, nil
	} else {
		d["datas"] = []any{[]any{end.Local().Format(pyTime), pages, 0, items, 0}}
		d["pages"], d["items"] = pages, items
	}
	d["latest_matches"] = map[string]string{"scrapy_version": "", "telnet_console": "", "telnet_username": "", "telnet_password": "",
		"resuming_crawl": "", "latest_offsite": "", "latest_duplicate": "", "latest_crawl": "", "latest_stat": "",
		"latest_scrape": "", "latest_item": ""}
	for _, k := range []string{"scrapy_version", "telnet_console", "resuming_crawl", "latest_offsite", "latest_duplicate", "latest_crawl", "latest_stat", "latest_scrape"} {
		d[k+"_timestamp"] = 0
	}
	cat := func(n int64) map[string]any { return map[string]any{"count": n, "details": []string{}} }
	d["log_categories"] = map[string]any{"critical_logs": cat(0), "error_logs": cat(j.Stats.Errors), "warning_logs": cat(0),
		"redirect_logs": cat(0), "retry_logs": cat(j.Stats.Retries), "ignore_logs": cat(0)}
	d["shutdown_reason"] = na
	d["finish_reason"] = finishReason(j)
	nowS := now.Local().Format(pyTime)
	cs := map[string]any{}
	if j.StartTime != "" {
		cs = map[string]any{"source": "crawlq", "last_update_time": nowS, "last_update_timestamp": now.Unix(),
			"response_received_count": pages, "item_scraped_count": items, "downloader/response_bytes": j.Stats.Bytes,
			"retry/count": j.Stats.Retries, "log_count/ERROR": j.Stats.Errors, "start_time": start.Local().Format(pyTime)}
		if endErr == nil {
			cs["finish_time"], cs["finish_reason"] = end.Local().Format(pyTime), finishReason(j)
			cs["elapsed_time_seconds"] = end.Sub(start).Seconds()
		}
	}
	d["crawler_stats"] = cs
	// What LogParser's service adds to parse()'s keys: the engine's state read over Scrapy's
	// telnet console (none here), and the log's first and last lines (left empty: the log is
	// at log_url).
	d["crawler_engine"], d["head"], d["tail"] = map[string]any{}, "", ""
	d["last_update_time"], d["last_update_timestamp"] = nowS, now.Unix()
	d["logparser_version"] = logParserVersion
	// crawlq's own verdict, for clients that know it.
	if j.Outcome != "" {
		d["crawlq_outcome"] = j.Outcome
	}
	return d
}

func (s *Server) serveLogParserJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.jobOf(r.Context(), r, ".json")
	if err != nil {
		s.fileError(w, r, err)
		return
	}
	writeJSONIndent(w, s.logParserJob(j, r.Host, s.cfg.Clock.Now()))
}

// serveStats answers /logs/stats.json as LogParser writes it: every started job's figures
// (LogParser's simplified keys) under datas[project][spider][job].
func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	jobs, err := s.listingJobs(r.Context(), "", "")
	if err != nil {
		s.fileError(w, r, err)
		return
	}
	now := s.cfg.Clock.Now()
	datas := map[string]map[string]map[string]any{}
	for _, j := range jobs {
		full := s.logParserJob(j, r.Host, now)
		d := map[string]any{}
		for _, k := range []string{"log_path", "json_path", "json_url", "size", "position", "status", "pages", "items",
			"first_log_time", "latest_log_time", "runtime", "shutdown_reason", "finish_reason", "last_update_time"} {
			d[k] = full[k]
		}
		if datas[j.Project] == nil {
			datas[j.Project] = map[string]map[string]any{}
		}
		if datas[j.Project][j.Spider] == nil {
			datas[j.Project][j.Spider] = map[string]any{}
		}
		datas[j.Project][j.Spider][j.ID] = d
	}
	writeJSONIndent(w, map[string]any{"status": "ok", "datas": datas, "settings_py": "", "settings": map[string]any{},
		"last_update_timestamp": now.Unix(), "last_update_time": now.Local().Format(pyTime), "logparser_version": logParserVersion})
}

func writeJSONIndent(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "    ")
	enc.Encode(v)
}

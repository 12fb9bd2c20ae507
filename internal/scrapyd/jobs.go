package scrapyd

import (
	"fmt"
	"html"
	"net/http"
	"strings"
	"time"

	"crawlq/internal/api"
)

// serveJobsPage answers GET /jobs as Scrapyd 1.x renders its Jobs page: an <h1>Jobs</h1> and a
// table with one <tr> per job whose cells are Project, Spider, Job, PID, Start, Runtime,
// Finish, Log and Items, pending jobs first, then running, then finished. ScrapydWeb's Jobs
// page, its Node Reports and its monitor read this page with one regular expression over those
// rows (its JOB_PATTERN): a pending job is one without a Start, a running one without a Finish,
// and times are '%Y-%m-%d %H:%M:%S'.
func (s *Server) serveJobsPage(w http.ResponseWriter, r *http.Request) {
	out := s.cfg.API.Run(r.Context(), &api.Request{Action: api.ActListJobs, Limit: 1000})
	if out["status"] != "ok" {
		msg, _ := out["message"].(string)
		s.log.ErrorContext(r.Context(), "scrapyd: jobs page", "err", msg)
		http.Error(w, "list jobs: "+msg, http.StatusInternalServerError)
		return
	}
	headers := []string{"Project", "Spider", "Job", "PID", "Start", "Runtime", "Finish", "Log"}
	if s.cfg.Items != nil {
		headers = append(headers, "Items")
	}
	now := s.cfg.Clock.Now()
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html>
<html lang="en">
<head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Scrapyd</title>
</head>
<body>
    <h1>Jobs</h1>
    <p><a href="./">Go up</a></p>
    <table id="jobs">
        <thead>
            <tr>
`)
	for _, h := range headers {
		fmt.Fprintf(&b, "                <th>%s</th>\n", h)
	}
	b.WriteString("            </tr>\n        </thead>\n")
	for _, g := range []struct{ key, title string }{{"pending", "Pending"}, {"running", "Running"}, {"finished", "Finished"}} {
		jobs, ok := out[g.key].([]api.Job)
		if !ok {
			s.log.ErrorContext(r.Context(), "scrapyd: jobs page", "err", fmt.Sprintf("listjobs' %s is a %T", g.key, out[g.key]))
			http.Error(w, "list jobs: unexpected answer", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(&b, "        <tbody>\n            <tr>\n                <th colspan=\"%d\">%s</th>\n            </tr>\n", len(headers), g.title)
		for _, j := range jobs {
			if g.key == "finished" && j.StartTime == "" {
				// Cancelled before it started: Scrapyd drops such a job from its queue and
				// never lists it, and a row without a Start would read as pending.
				continue
			}
			cells := jobCells(j, g.key, now)
			b.WriteString("            <tr>\n")
			for _, h := range headers {
				fmt.Fprintf(&b, "                <td>%s</td>\n", cells[h])
			}
			b.WriteString("            </tr>\n")
		}
		b.WriteString("        </tbody>\n")
	}
	b.WriteString("    </table>\n</body>\n</html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(b.String()))
}

// jobCells are one job's cells as Scrapyd fills them: a pending job has no PID, times or links;
// a running one no Finish; a finished one no PID; Runtime is Python's str(timedelta) without
// microseconds.
func jobCells(j api.Job, group string, now time.Time) map[string]string {
	c := map[string]string{"Project": html.EscapeString(j.Project), "Spider": html.EscapeString(j.Spider), "Job": html.EscapeString(j.ID)}
	if group == "pending" {
		return c
	}
	start, serr := time.Parse(time.RFC3339Nano, j.StartTime)
	end, eerr := time.Parse(time.RFC3339Nano, j.EndTime)
	if group == "running" {
		if j.PID != 0 {
			c["PID"] = fmt.Sprint(j.PID)
		}
		end, eerr = now, nil
	} else if eerr == nil {
		c["Finish"] = end.Local().Format(pyTime)
	}
	if serr == nil {
		c["Start"] = start.Local().Format(pyTime)
		if eerr == nil {
			c["Runtime"] = pyDuration(end.Sub(start))
		}
	}
	c["Log"] = `<a href="` + html.EscapeString(j.LogURL) + `">Log</a>`
	c["Items"] = `<a href="` + html.EscapeString(j.ItemsURL) + `">Items</a>`
	return c
}

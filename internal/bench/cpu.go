package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, fixed at 100 by the
// Linux ABI whatever the kernel's internal tick rate.
const userHZ = 100

// errNoLocalServer says the Postgres server's processes cannot be read from this machine's
// /proc (a remote server, or not Linux): its CPU is then reported as unknown, not as zero.
var errNoLocalServer = errors.New("postgres server processes not visible in /proc")

// pgServer reads the CPU of a Postgres server that runs on this machine: the postmaster
// and every process it forked (backends, checkpointer, WAL writer, autovacuum).
type pgServer struct {
	postmaster int
}

// findPGServer finds the postmaster as the parent of one of the pool's backends, and checks
// that the process there really is postgres (the pid of a remote backend may name an
// unrelated local process).
func findPGServer(ctx context.Context, pool *pgxpool.Pool) (pgServer, error) {
	var backend int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return pgServer{}, fmt.Errorf("find postgres server: %w", err)
	}
	st, err := readStat(backend)
	if err != nil || !strings.HasPrefix(st.comm, "postgres") {
		return pgServer{}, errNoLocalServer
	}
	pm, err := readStat(st.ppid)
	if err != nil || !strings.HasPrefix(pm.comm, "postgres") {
		return pgServer{}, errNoLocalServer
	}
	return pgServer{postmaster: st.ppid}, nil
}

// cpu returns the server's CPU so far: the postmaster's own and its reaped children's
// (backends that exited), plus the CPU of each child alive now. A backend that exits
// between two readings moves from the live sum to the reaped one, so a difference of two
// readings counts it once.
func (s pgServer) cpu() (time.Duration, error) {
	pm, err := readStat(s.postmaster)
	if err != nil {
		return 0, fmt.Errorf("read postmaster cpu: %w", err)
	}
	ticks := pm.utime + pm.stime + pm.cutime + pm.cstime
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == s.postmaster {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != s.postmaster {
			continue // gone, or not the server's
		}
		ticks += st.utime + st.stime
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

type procStat struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64
}

// readStat parses /proc/<pid>/stat (proc(5)): comm is in parentheses and may hold spaces,
// so the fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(s[end+1:])
	// f[0] is field 3 (state); ppid is field 4, utime..cstime fields 14..17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	st := procStat{comm: s[open+1 : end]}
	var nums [5]int64
	for i, idx := range []int{1, 11, 12, 13, 14} {
		if nums[i], err = strconv.ParseInt(f[idx], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
		}
	}
	st.ppid = int(nums[0])
	st.utime, st.stime, st.cutime, st.cstime = nums[1], nums[2], nums[3], nums[4]
	return st, nil
}

// cpuMeter measures the CPU of this process and, when it runs here, of the Postgres server
// between start and stop.
type cpuMeter struct {
	mallocs0, Mallocs uint64 // heap allocations of this process (Mallocs: during the measure)
	pg                pgServer
	pgErr             error
	self0, pg0        time.Duration
	Self, PG          time.Duration // filled by stop
	PGKnown           bool          // false when the server's CPU could not be read
	// The measured pool's own backends: each one's CPU when the measure started (0 for those
	// that started later), and their CPU during it (Backends). Unlike PG it leaves out what other
	// work on a shared server costs, and also the server's own processes (WAL writer,
	// checkpointer, autovacuum): a floor of the crawl's server CPU where PG is a ceiling.
	pool      *pgxpool.Pool
	backends0 map[int]int64
	Backends  time.Duration
}

// backendTicks returns the CPU ticks so far of each backend of pool's connections (those with
// its application name).
func backendTicks(ctx context.Context, pool *pgxpool.Pool) (map[int]int64, error) {
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = current_setting('application_name')`)
	if err != nil {
		return nil, fmt.Errorf("list the pool's backends: %w", err)
	}
	defer rows.Close()
	out := map[int]int64{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		if st, err := readStat(pid); err == nil {
			out[pid] = st.utime + st.stime
		}
	}
	return out, rows.Err()
}

func startCPU(ctx context.Context, pool *pgxpool.Pool) *cpuMeter {
	m := &cpuMeter{}
	m.pg, m.pgErr = findPGServer(ctx, pool)
	if m.pgErr == nil {
		m.pg0, m.pgErr = m.pg.cpu()
	}
	if m.pgErr == nil {
		m.pool = pool
		if m.backends0, m.pgErr = backendTicks(ctx, pool); m.pgErr != nil {
			m.pool = nil
		}
	}
	m.mallocs0 = mallocs()
	m.self0 = selfCPU()
	return m
}

// mallocs is the number of heap objects this process has allocated so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

func (m *cpuMeter) stop() {
	m.Self = selfCPU() - m.self0
	m.Mallocs = mallocs() - m.mallocs0
	if m.pgErr == nil {
		var pg1 time.Duration
		if pg1, m.pgErr = m.pg.cpu(); m.pgErr == nil {
			m.PG, m.PGKnown = pg1-m.pg0, true
		}
	}
	if m.PGKnown && m.pool != nil {
		now, err := backendTicks(context.Background(), m.pool)
		if err != nil {
			m.PGKnown, m.pgErr = false, err
			return
		}
		var ticks int64
		for pid, t := range now {
			ticks += t - m.backends0[pid]
		}
		m.Backends = time.Duration(ticks) * time.Second / userHZ
	}
}

// fields renders the measure for a RESULT line: this process's heap allocations per page, and
// CPU seconds and CPU seconds per 1,000 pages for this process, the server (na when unknown)
// and both.
func (m *cpuMeter) fields(pages int64) string {
	per := func(d time.Duration) string {
		if pages <= 0 {
			return "na"
		}
		return fmt.Sprintf("%.3f", d.Seconds()*1000/float64(pages))
	}
	allocs := "na"
	if pages > 0 {
		allocs = fmt.Sprintf("%.0f", float64(m.Mallocs)/float64(pages))
	}
	s := fmt.Sprintf("allocs_per_page=%s cpu_s=%.2f cpu_s_per_1k_pages=%s", allocs, m.Self.Seconds(), per(m.Self))
	if !m.PGKnown {
		return s + " pg_cpu_s=na pg_cpu_s_per_1k_pages=na total_cpu_s_per_1k_pages=na pg_backends_cpu_s_per_1k_pages=na own_total_cpu_s_per_1k_pages=na"
	}
	return s + fmt.Sprintf(" pg_cpu_s=%.2f pg_cpu_s_per_1k_pages=%s total_cpu_s_per_1k_pages=%s pg_backends_cpu_s_per_1k_pages=%s own_total_cpu_s_per_1k_pages=%s",
		m.PG.Seconds(), per(m.PG), per(m.Self+m.PG), per(m.Backends), per(m.Self+m.Backends))
}

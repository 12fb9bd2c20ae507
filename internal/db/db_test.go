package db_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"crawlq/internal/db"
)

// A default_query_exec_mode in the URL is honoured unless ExecMode says otherwise.
func TestExecModeFromURL(t *testing.T) {
	for _, tc := range []struct {
		url, mode string
		want      pgx.QueryExecMode
	}{
		{"postgres://u@h/d", "", pgx.QueryExecModeExec},
		{"postgres://u@h/d?default_query_exec_mode=cache_statement", "", pgx.QueryExecModeCacheStatement},
		{"postgres://u@h/d?default_query_exec_mode=cache_statement", "exec", pgx.QueryExecModeExec},
	} {
		pc, err := db.Config{URL: tc.url, ExecMode: tc.mode}.PoolConfig()
		if err != nil {
			t.Fatal(err)
		}
		if got := pc.ConnConfig.DefaultQueryExecMode; got != tc.want {
			t.Errorf("%s with ExecMode %q: mode %v, want %v", tc.url, tc.mode, got, tc.want)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// TestBenchBotsAndPeopleInAQueue runs bench --bots --admission queue on
// two child processes of async on the real Redis and MariaDB: the audit
// is exact (no oversell, one unit per buyer though the limit is 2, so a
// pass spent twice would show), every pass was spent once, and the units
// the report gives the bots are those MySQL's orders of bot accounts
// (ids past --users) hold.
func TestBenchBotsAndPeopleInAQueue(t *testing.T) {
	stdout, raw, dbURL := benchOnServersDB(t, "--strategy", "async", "--instances", "2", "--stock", "10", "--users", "30",
		"--bots", "10", "--bot-rate", "50", "--queue-lead", "500ms", "--admission", "queue", "--admit-per-second", "20",
		"--limit-per-buyer", "2", "--concurrency", "20")
	var doc struct {
		Setup lab.Setup
		Runs  []lab.Row
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 1 || doc.Setup.Bots != 10 || doc.Setup.Admission != "queue" || doc.Setup.AdmitPerSecond != 20 {
		t.Fatalf("setup %+v, %d runs; want one run of 10 bots on a queue admitting 20/s", doc.Setup, len(doc.Runs))
	}
	r := doc.Runs[0]
	c := r.Crowd
	if !r.Exact() || r.Errors != 0 || c == nil || r.Units != 10 || r.MaxBuyerUnits != 1 || c.PassReused != 0 || c.Joins != 40 {
		t.Fatalf("run %+v, crowd %+v; want 10 units sold exactly, one a buyer, 40 joins", r, c)
	}
	db, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, orders, err := db.VoucherSnapshot(context.Background(), r.VoucherID)
	if err != nil {
		t.Fatal(err)
	}
	bots := 0
	for _, o := range orders {
		if o.Status.Live() && o.UserID > 30 {
			bots += o.Units()
		}
	}
	if c.BotUnits != bots || c.HumanUnits != 10-bots || c.AccountShare() != 25 {
		t.Errorf("crowd %+v; MySQL: bots hold %d units; want the report's split to be MySQL's", *c, bots)
	}
	for _, want := range []string{"admission  humans  bots  accounts", "async, queue admission: the bots, 25.0% of the accounts, won"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

// TestBenchAdmissions: --admission lists the runs of each strategy, one
// per admission; none listed is one run on the servers' default.
func TestBenchAdmissions(t *testing.T) {
	for _, tt := range []struct {
		flag string
		want []string
	}{{"", []string{""}}, {"queue", []string{"queue"}}, {"open, queue", []string{"open", "queue"}}, {"open,open", []string{"open"}}} {
		c := benchCrowd{admission: tt.flag}
		if got := c.admissions(); !slices.Equal(got, tt.want) || !c.valid() {
			t.Errorf("--admission %q: runs %q (valid %v), want %q", tt.flag, got, c.valid(), tt.want)
		}
	}
}

// TestBenchOpenAndQueueSideBySide runs bench --admission open,queue in
// this process on the embedded backends: one row per admission, labelled
// with it, both exact, each with its crowd.
func TestBenchOpenAndQueueSideBySide(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "runs.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench", "--strategy", "async", "--stock", "10", "--users", "40", "--bots", "10",
		"--queue-lead", "500ms", "--admission", "open,queue", "--admit-per-second", "50", "--concurrency", "20", "--json", jsonPath}, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("bench: %v\nstderr:\n%s", err, stderr.String())
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Runs []lab.Row }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(doc.Runs))
	}
	for i, adm := range []string{"open", "queue"} {
		r := doc.Runs[i]
		if r.Strategy != "async "+adm || !r.Exact() || r.Units != 10 || r.Crowd == nil || r.Crowd.Admission != adm ||
			r.Crowd.BotUnits+r.Crowd.HumanUnits != 10 || (adm == "queue") != (r.Crowd.Joins == 50) {
			t.Errorf("run %d: %+v, crowd %+v; want async %s, exact, 10 units split", i, r, r.Crowd, adm)
		}
	}
}

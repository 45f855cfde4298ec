package main

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestREADMESamples runs the README's quickstart against serve --strategy
// async (on embedded backends): the voucher body it sends, the order's
// answer it shows (its "…" standing for the id) and what it says the
// voucher then reads, so that its samples cannot drift from the program.
// (The demo's table: TestDemo.)
func TestREADMESamples(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sample := func(re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindSubmatch(readme)
		if m == nil {
			t.Fatalf("the README has no %s", re)
		}
		return string(m[1])
	}
	body := sample(`-d '(\{"title".*?\})'`)
	answer := sample(`echo "\$ANSWER" +# (\{.*\})`)
	voucher := sample(`/api/vouchers/\$VOUCHER +# (.*)`)

	url, _ := startServe(t, "--strategy", "async")
	var v struct{ ID string }
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, body, &v); code != http.StatusCreated {
		t.Fatalf("the README's voucher: %d", code)
	}
	got := fetch(t, "POST", url+"/api/vouchers/"+v.ID+"/orders", userToken(t, 42))
	want := "^" + strings.ReplaceAll(regexp.QuoteMeta(answer), "…", `[0-9]+`) + "$"
	if !regexp.MustCompile(want).MatchString(strings.TrimSpace(got)) {
		t.Errorf("the README shows the order's answer as %s; the program answers %s", answer, got)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got := fetch(t, "GET", url+"/api/vouchers/"+v.ID, "")
		if strings.Contains(got, voucher) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the README says the voucher reads %s; the program answers %s", voucher, got)
		}
	}
}

// fetch sends a request with an optional bearer token and returns the
// answer's JSON as sent.
func fetch(t *testing.T, method, url, token string) string {
	t.Helper()
	var raw json.RawMessage
	call(t, method, url, token, "", &raw)
	return string(raw)
}

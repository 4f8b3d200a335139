package auth

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestTheCacheNeverOutlivesTheTokensExpiry(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := &Authenticator{ttl: 10 * time.Second, now: func() time.Time { return now }}
	jwt := func(claims string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".c2ln"
	}
	for _, tc := range []struct {
		token string
		want  time.Duration
	}{
		{"opaque-token", 10 * time.Second},
		{jwt(fmt.Sprintf(`{"exp":%d}`, now.Unix()+3)), 3 * time.Second},
		{jwt(fmt.Sprintf(`{"exp":%d}`, now.Unix()+3600)), 10 * time.Second},
		{jwt(fmt.Sprintf(`{"exp":%d}`, now.Unix()-5)), -5 * time.Second},
		{jwt(`{"sub":"alice"}`), 10 * time.Second},
	} {
		if got := a.cacheTTL(tokenExpiry(tc.token)); got != tc.want {
			t.Errorf("cacheTTL(%s) = %s, want %s", tc.token, got, tc.want)
		}
	}
}

func TestReviewKeysTellQuestionsApart(t *testing.T) {
	a := Attributes{Verb: "get", Group: "batch", Resource: "jobs", Namespace: "a", Name: "j"}
	keys := map[string]string{}
	for name, q := range map[string]struct {
		id *Identity
		a  Attributes
	}{
		"alice":              {&Identity{User: "alice"}, a},
		"alice in team":      {&Identity{User: "alice", Groups: []string{"team"}}, a},
		"alice team as user": {&Identity{User: "aliceteam"}, a},
		"alice with extra":   {&Identity{User: "alice", Extra: map[string][]string{"team": nil}}, a},
		"other namespace":    {&Identity{User: "alice"}, Attributes{Verb: "get", Group: "batch", Resource: "jobs", Namespace: "aj"}},
		"a path":             {&Identity{User: "alice"}, Attributes{Verb: "get", Path: "/metrics"}},
		"a resource like it": {&Identity{User: "alice"}, Attributes{Verb: "get", Resource: "/metrics"}},
	} {
		k := reviewKey(q.id, q.a)
		if other, ok := keys[k]; ok {
			t.Errorf("%s and %s share a key", name, other)
		}
		keys[k] = name
	}
	if reviewKey(&Identity{User: "u", Groups: []string{"b", "a"}}, a) != reviewKey(&Identity{User: "u", Groups: []string{"a", "b"}}, a) {
		t.Error("the order of groups changes the key")
	}
}

func TestTokenFileIsReadAgainAsItRotates(t *testing.T) {
	path := t.TempDir() + "/token"
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first\n")
	creds := TokenFile(path).(*tokenFile)
	get := func() string {
		md, err := creds.GetRequestMetadata(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return md["authorization"]
	}
	if got := get(); got != "Bearer first" {
		t.Fatalf("got %q", got)
	}
	write("second")
	if got := get(); got != "Bearer first" {
		t.Errorf("read again within the minute: %q", got)
	}
	creds.read = creds.read.Add(-2 * tokenFileRereadEvery)
	if got := get(); got != "Bearer second" {
		t.Errorf("after a minute: %q, want the rotated token", got)
	}
	// A rotation caught half-way (an empty or missing file) keeps the last token.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	creds.read = creds.read.Add(-2 * tokenFileRereadEvery)
	if got := get(); got != "Bearer second" {
		t.Errorf("with the file gone: %q", got)
	}
}

package auth

import (
	"encoding/base64"
	"fmt"
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
		if got := a.cacheTTL(tc.token); got != tc.want {
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

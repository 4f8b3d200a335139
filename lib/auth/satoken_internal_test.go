package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const testIssuer = "https://kubernetes.default.svc"

// issuerServer serves an API server's service account issuer discovery
// for the keys it holds, and counts the reads of the keys.
type issuerServer struct {
	mu        sync.Mutex
	keys      map[string]crypto.PublicKey
	forbidden bool
	reads     atomic.Int32
}

func (s *issuerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forbidden {
		http.Error(w, `{"kind":"Status","code":403}`, http.StatusForbidden)
		return
	}
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": testIssuer, "jwks_uri": testIssuer + "/openid/v1/jwks"})
	case "/openid/v1/jwks":
		s.reads.Add(1)
		var set []map[string]string
		for kid, k := range s.keys {
			b64 := func(i *big.Int) string { return base64.RawURLEncoding.EncodeToString(i.Bytes()) }
			switch k := k.(type) {
			case *rsa.PublicKey:
				set = append(set, map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig", "n": b64(k.N), "e": b64(big.NewInt(int64(k.E)))})
			case *ecdsa.PublicKey:
				point, err := k.Bytes() // 4, x, y
				if err != nil {
					panic(err)
				}
				x, y := point[1:33], point[33:]
				set = append(set, map[string]string{"kty": "EC", "kid": kid, "alg": "ES256", "use": "sig", "crv": "P-256",
					"x": base64.RawURLEncoding.EncodeToString(x), "y": base64.RawURLEncoding.EncodeToString(y)})
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": set})
	default:
		http.NotFound(w, r)
	}
}

func (s *issuerServer) publish(kid string, k crypto.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[kid] = k
}

// keysOf starts an issuer server and the keys reading it.
func keysOf(t *testing.T) (*issuerServer, *serviceAccountKeys) {
	t.Helper()
	issuer := &issuerServer{keys: map[string]crypto.PublicKey{}}
	srv := httptest.NewServer(issuer)
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return issuer, &serviceAccountKeys{client: client.Discovery().RESTClient(), log: slog.New(slog.DiscardHandler), now: time.Now}
}

// signedToken is a JWT of claims, its header naming kid and alg, signed
// by key (nil: with the signature given).
func signedToken(t *testing.T, alg, kid string, claims map[string]any, key crypto.Signer) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(map[string]string{"alg": alg, "kid": kid}) + "." + enc(claims)
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		s, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = s
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	case nil:
		sig = []byte("not a signature")
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func saClaims(issuer string) map[string]any {
	return map[string]any{"iss": issuer, "sub": "system:serviceaccount:team-a:alice", "aud": []string{"jobplane-executor"}, "exp": time.Now().Add(time.Hour).Unix()}
}

func TestServiceAccountTokensAreCheckedAgainstTheClustersKeys(t *testing.T) {
	issuer, keys := keysOf(t)
	rsaKey := newRSAKey(t)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherKey := newRSAKey(t)
	issuer.publish("rsa", &rsaKey.PublicKey)
	issuer.publish("ec", &ecKey.PublicKey)
	cases := []struct {
		name       string
		token      string
		want       tokenCheck
		wantTenant string
	}{
		{"signed with the cluster's RSA key", signedToken(t, "RS256", "rsa", saClaims(testIssuer), rsaKey), signed, "namespace:team-a"},
		{"signed with the cluster's EC key", signedToken(t, "ES256", "ec", saClaims(testIssuer), ecKey), signed, "namespace:team-a"},
		{"signed with another key, naming the cluster's", signedToken(t, "RS256", "rsa", saClaims(testIssuer), otherKey), forged, ""},
		{"not signed", signedToken(t, "RS256", "rsa", saClaims(testIssuer), nil), forged, ""},
		{"alg none", signedToken(t, "none", "rsa", saClaims(testIssuer), nil), forged, ""},
		{"an RSA signature said to be ECDSA", signedToken(t, "ES256", "rsa", saClaims(testIssuer), rsaKey), forged, ""},
		{"a key the cluster does not have", signedToken(t, "RS256", "made-up", saClaims(testIssuer), otherKey), forged, ""},
		{"another issuer's", signedToken(t, "RS256", "rsa", saClaims("https://idp.example.com"), otherKey), unchecked, ""},
		{"not a JWT", "made-up-token", unchecked, ""},
		{"three parts, not base64", "a.b.c", unchecked, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, tenant := keys.check(context.Background(), tc.token)
			if got != tc.want || tenant != tc.wantTenant {
				t.Errorf("check = %v %q, want %v %q", got, tenant, tc.want, tc.wantTenant)
			}
		})
	}
}

// A key the cluster starts signing with is read again when a token names
// it; tokens naming keys it does not have read the keys at most once per
// keysRefreshEvery, however many.
func TestTheKeysAreReadAgainForANewKeyOnly(t *testing.T) {
	issuer, keys := keysOf(t)
	old := newRSAKey(t)
	issuer.publish("old", &old.PublicKey)
	if got, _ := keys.check(context.Background(), signedToken(t, "RS256", "old", saClaims(testIssuer), old)); got != signed {
		t.Fatalf("a token of the old key: %v, want signed", got)
	}
	rotated := newRSAKey(t)
	issuer.publish("new", &rotated.PublicKey)
	if got, _ := keys.check(context.Background(), signedToken(t, "RS256", "new", saClaims(testIssuer), rotated)); got != signed {
		t.Fatalf("a token of the new key: %v, want signed", got)
	}
	before := issuer.reads.Load()
	start := time.Now()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if got, _ := keys.check(context.Background(), signedToken(t, "RS256", "made-up", saClaims(testIssuer), old)); got != forged {
				t.Errorf("a made-up key: %v, want forged", got)
			}
		})
	}
	wg.Wait()
	if reads, most := issuer.reads.Load()-before, int32(time.Since(start)/keysRefreshEvery)+1; reads > most {
		t.Errorf("%d reads of the keys for 50 tokens of a made-up key in %s, want at most %d", reads, time.Since(start).Round(time.Millisecond), most)
	}
}

// Keys that cannot be read (the API server refuses discovery) leave every
// token unchecked, to be reviewed, and are not asked again at once.
func TestUnreadableKeysLeaveTokensUnchecked(t *testing.T) {
	issuer, keys := keysOf(t)
	key := newRSAKey(t)
	issuer.publish("k", &key.PublicKey)
	issuer.forbidden = true
	for range 3 {
		if got, _ := keys.check(context.Background(), signedToken(t, "RS256", "k", saClaims(testIssuer), nil)); got != unchecked {
			t.Errorf("with the keys unreadable: %v, want unchecked", got)
		}
	}
	if n := issuer.reads.Load(); n != 0 {
		t.Errorf("%d reads of the keys served, want none", n)
	}
}

func newRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

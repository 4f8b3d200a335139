package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

const testIssuer = "https://kubernetes.default.svc"

// issuerServer serves an API server's service account issuer discovery
// for the keys it holds, and counts the reads of the keys.
type issuerServer struct {
	mu        sync.Mutex
	keys      map[string]crypto.PublicKey
	forbidden bool
	reads     atomic.Int32 // of the keys
	requests  atomic.Int32 // of either document
}

func (s *issuerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
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
		{"naming no key, signed by the cluster's", signedToken(t, "RS256", "", saClaims(testIssuer), rsaKey), signed, "namespace:team-a"},
		{"naming the EC key, signed by the RSA one", signedToken(t, "RS256", "ec", saClaims(testIssuer), rsaKey), signed, "namespace:team-a"},
		{"a key the cluster does not publish", signedToken(t, "RS256", "made-up", saClaims(testIssuer), otherKey), unchecked, ""},
		{"another issuer's", signedToken(t, "RS256", "rsa", saClaims("https://idp.example.com"), otherKey), unchecked, ""},
		{"not a JWT", "made-up-token", unchecked, ""},
		{"three parts, not base64", "a.b.c", unchecked, ""},
		{"spelled anew (non-canonical base64)", respelled(signedToken(t, "RS256", "rsa", saClaims(testIssuer), rsaKey)), unchecked, ""},
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

// A key the cluster starts signing with is read again, in the background,
// when a token names it; tokens naming keys it does not have, and tokens of
// other issuers, wait for no read and read the keys at most once per
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
	time.Sleep(keysRefreshEvery)
	newToken := signedToken(t, "RS256", "new", saClaims(testIssuer), rotated)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, _ := keys.check(context.Background(), newToken)
		if got == signed {
			break
		}
		if got != unchecked || time.Now().After(deadline) {
			t.Fatalf("a token of the new key: %v, want unchecked until the keys are read again, then signed", got)
		}
	}
	// Signed before the checks start: a goroutine must not stop the test.
	tokens := make([]string, 50)
	for i := range tokens {
		tokens[i] = signedToken(t, "RS256", "made-up", saClaims(testIssuer), newRSAKeyFor(t, i))
		if i%2 == 1 {
			tokens[i] = signedToken(t, "RS256", "old", saClaims("https://idp.example.com"), old)
		}
	}
	before := issuer.reads.Load()
	start := time.Now()
	var wg sync.WaitGroup
	for _, token := range tokens {
		wg.Go(func() {
			if got, _ := keys.check(context.Background(), token); got != unchecked {
				t.Errorf("a made-up key or another issuer: %v, want unchecked", got)
			}
		})
	}
	wg.Wait()
	if waited := time.Since(start); waited > keysRefreshEvery {
		t.Errorf("50 checks took %s: they waited for reads", waited)
	}
	if reads, most := issuer.reads.Load()-before, int32(time.Since(start)/keysRefreshEvery)+1; reads > most {
		t.Errorf("%d reads of the keys for 50 tokens of made-up keys or other issuers, want at most %d", reads, most)
	}
}

// Keys that cannot be read (the API server refuses discovery) leave every
// token unchecked, to be reviewed, and are asked for again only after
// keysRetryAfterFailure: then tokens are checked again.
func TestUnreadableKeysLeaveTokensUnchecked(t *testing.T) {
	issuer, keys := keysOf(t)
	now := time.Now()
	keys.now = func() time.Time { return now }
	key := newRSAKey(t)
	issuer.publish("k", &key.PublicKey)
	issuer.forbidden = true
	forgedToken := signedToken(t, "RS256", "k", saClaims(testIssuer), nil)
	for range 3 {
		if got, _ := keys.check(context.Background(), forgedToken); got != unchecked {
			t.Errorf("with the keys unreadable: %v, want unchecked", got)
		}
	}
	if n := issuer.requests.Load(); n != 1 {
		t.Errorf("%d requests for the keys, want 1 within keysRetryAfterFailure", n)
	}
	issuer.mu.Lock()
	issuer.forbidden = false
	issuer.mu.Unlock()
	now = now.Add(keysRetryAfterFailure)
	if got, _ := keys.check(context.Background(), forgedToken); got != forged {
		t.Errorf("with the keys readable again: %v, want forged", got)
	}
}

// A token the cluster signed waits in its tenant's lane while it has not
// expired; expired, anyone holding it could replay it ahead of the tenant's
// own reviews (its refusal is not cached), so it waits in its host's lane.
// One no key signed is refused without a lane.
func TestAnExpiredTokenWaitsInItsHostsLane(t *testing.T) {
	issuer, keys := keysOf(t)
	key := newRSAKey(t)
	issuer.publish("k", &key.PublicKey)
	a := &Authenticator{keys: keys, ttl: 10 * time.Second, now: time.Now}
	expired := saClaims(testIssuer)
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	for _, tc := range []struct {
		name     string
		token    string
		want     string
		wantHost bool
	}{
		{"signed", signedToken(t, "RS256", "k", saClaims(testIssuer), key), tenantLane("namespace:team-a"), false},
		{"signed, expired", signedToken(t, "RS256", "k", expired, key), "hosts/10.0.0.1", true},
		{"not a JWT", "made-up", "hosts/10.0.0.1", true},
	} {
		expiry, expires := tokenExpiry(tc.token)
		lane, byHost, forged := a.laneOf(context.Background(), tc.token, "10.0.0.1", expiry, expires)
		if forged || lane != tc.want || byHost != tc.wantHost {
			t.Errorf("%s: lane %q (host's: %v, forged: %v); want %q (host's: %v)", tc.name, lane, byHost, forged, tc.want, tc.wantHost)
		}
	}
	if _, _, forged := a.laneOf(context.Background(), signedToken(t, "RS256", "k", saClaims(testIssuer), nil), "10.0.0.1", time.Time{}, false); !forged {
		t.Error("a token no key signed was not found forged")
	}
}

// A forged token is refused with the keys' reason, and its refusal cached
// as a review's is: a replay checks no signature again.
func TestAForgedTokensRefusalIsCached(t *testing.T) {
	issuer, keys := keysOf(t)
	issuer.publish("k", &newRSAKey(t).PublicKey)
	a := NewAuthenticator(Config{TokenCacheTTL: 10 * time.Second, TokenCacheSize: 16}, fake.NewClientset(), nil, slog.New(slog.DiscardHandler))
	a.keys = keys
	forgedToken := signedToken(t, "RS256", "k", saClaims(testIssuer), nil)
	for i := range 2 {
		if _, err := a.reviewToken(context.Background(), forgedToken, "10.0.0.1"); err == nil || !strings.Contains(err.Error(), "none of the cluster's keys signed it") {
			t.Fatalf("call %d: %v, want refused with the keys' reason", i, err)
		}
		sum := sha256.Sum256([]byte(forgedToken))
		if _, ok := a.refused.Get(string(sum[:])); !ok {
			t.Fatalf("call %d: the refusal is not cached", i)
		}
	}
}

// A read of the keys the API server refuses, set off by a token naming a
// key the cluster does not have, keeps the keys read before: a token that
// names a known key and is signed by none stays forged, refused without a
// review.
func TestAFailedReadKeepsTheKeysReadBefore(t *testing.T) {
	issuer, keys := keysOf(t)
	now := time.Now()
	keys.now = func() time.Time { return now }
	issuer.publish("k", &newRSAKey(t).PublicKey)
	forgedToken := signedToken(t, "RS256", "k", saClaims(testIssuer), nil)
	if got, _ := keys.check(context.Background(), forgedToken); got != forged {
		t.Fatalf("with the keys read: %v, want forged", got)
	}
	issuer.mu.Lock()
	issuer.forbidden = true
	issuer.mu.Unlock()
	now = now.Add(keysRefreshEvery)
	before := issuer.requests.Load()
	keys.check(context.Background(), signedToken(t, "RS256", "unknown", saClaims(testIssuer), nil))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		keys.mu.Lock()
		read := keys.failed && !keys.reading
		keys.mu.Unlock()
		if read {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed read of the keys after a token of an unknown key (%d requests before, %d now)", before, issuer.requests.Load())
		}
	}
	if got, _ := keys.check(context.Background(), forgedToken); got != forged {
		t.Errorf("after a failed read: %v, want forged (the keys read before)", got)
	}
}

// EC keys of every curve the API server signs with, their coordinates as
// short as big-endian integers may write them, are read and verify.
func TestECKeysOfEachCurveAreRead(t *testing.T) {
	for _, curve := range []elliptic.Curve{elliptic.P256(), elliptic.P384(), elliptic.P521()} {
		t.Run(curve.Params().Name, func(t *testing.T) {
			size := (curve.Params().BitSize + 7) / 8
			var key *ecdsa.PrivateKey
			var point []byte
			for point == nil || point[1] != 0 { // an x coordinate with a leading zero byte
				var err error
				if key, err = ecdsa.GenerateKey(curve, rand.Reader); err != nil {
					t.Fatal(err)
				}
				if point, err = key.PublicKey.Bytes(); err != nil {
					t.Fatal(err)
				}
			}
			x := bytes.TrimLeft(point[1:1+size], "\x00")
			jwks := fmt.Sprintf(`{"keys":[{"kty":"EC","kid":"k","crv":%q,"x":%q,"y":%q}]}`, curve.Params().Name,
				base64.RawURLEncoding.EncodeToString(x), base64.RawURLEncoding.EncodeToString(point[1+size:]))
			keys, err := parseJWKS([]byte(jwks))
			if err != nil {
				t.Fatal(err)
			}
			hash := map[int]crypto.Hash{256: crypto.SHA256, 384: crypto.SHA384, 521: crypto.SHA512}[curve.Params().BitSize]
			alg := map[crypto.Hash]string{crypto.SHA256: "ES256", crypto.SHA384: "ES384", crypto.SHA512: "ES512"}[hash]
			signedInput := "e30.e30" // {}.{}
			h := hash.New()
			h.Write([]byte(signedInput))
			r, sig, err := ecdsa.Sign(rand.Reader, key, h.Sum(nil))
			if err != nil {
				t.Fatal(err)
			}
			signature := append(r.FillBytes(make([]byte, size)), sig.FillBytes(make([]byte, size))...)
			if !verifySignature(keys["k"], jwt{alg: alg, signed: []byte(signedInput), signature: signature}) {
				t.Error("a signature of the key does not verify")
			}
		})
	}
}

// respelled is token with its signature's last character changed to one
// that decodes to the same bytes in lenient base64 (its unused low bits
// set), or token unchanged when none does.
func respelled(token string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, token[len(token)-1])
	if len(token[strings.LastIndexByte(token, '.')+1:])%4 == 2 && last%16 == 0 {
		return token[:len(token)-1] + string(alphabet[last+1])
	}
	if len(token[strings.LastIndexByte(token, '.')+1:])%4 == 3 && last%4 == 0 {
		return token[:len(token)-1] + string(alphabet[last+1])
	}
	return token
}

// newRSAKeyFor is a key of its own for the i-th of many tokens: the same
// few keys, generated once.
func newRSAKeyFor(t *testing.T, i int) *rsa.PrivateKey {
	spareOnce.Do(func() {
		for range 2 {
			spare = append(spare, newRSAKey(t))
		}
	})
	return spare[i%len(spare)]
}

var (
	spareOnce sync.Once
	spare     []*rsa.PrivateKey
)

func newRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

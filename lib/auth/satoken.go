package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/client-go/rest"
)

// The cluster's service account tokens, checked here before any review:
// the API server publishes the keys that sign them (service account issuer
// discovery: /.well-known/openid-configuration and /openid/v1/jwks, which
// every service account may read), so a token claiming to be the cluster's
// and one of its keys whose signature does not verify is made up, and is
// refused without a TokenReview; one whose signature verifies names its
// service account truthfully, and its review waits in its tenant's lane
// rather than its host's (the hosts' lanes together get at most 9 in 17 of the
// turns while tenants' wait). A made-up token of the cluster's issuer and
// key can then take no turn of the reviews, from however many hosts it
// comes; one of another issuer or key is reviewed in its host's lane, as
// any token the cluster may accept through another authenticator. The
// TokenReview still decides: a signed token may be expired, for another
// audience, or bound to a deleted pod.

// serviceAccountKeys holds the cluster's issuer and signing keys, read
// when first needed and again, in the background, when a token of the
// issuer names a key it does not hold (a key rotation), at most once per
// keysRefreshEvery.
type serviceAccountKeys struct {
	client rest.Interface // nil: no discovery to read; every token is reviewed
	log    *slog.Logger
	now    func() time.Time

	mu      sync.Mutex
	issuer  string
	keys    map[string]crypto.PublicKey // by key id
	fetched time.Time                   // zero: never read
	failed  bool                        // the last read failed
	reading bool                        // a read is under way

	refresh singleflight.Group
}

const (
	// keysRefreshEvery bounds how often tokens naming an unknown key make
	// the keys be read again.
	keysRefreshEvery = time.Second
	// keysRetryAfterFailure is how long tokens go unchecked after the keys
	// could not be read (the API server down, or discovery not allowed).
	keysRetryAfterFailure = time.Minute
)

// tokenCheck is what the keys say of a token.
type tokenCheck int

const (
	// unchecked: not a token of the cluster's issuer, or signed by a key
	// the cluster does not publish (a new one, or one kept out of
	// discovery), or the keys cannot be read; it is reviewed as any other.
	unchecked tokenCheck = iota
	// forged: it claims the cluster's issuer and one of its keys, and no
	// key of the cluster signed it.
	forged
	// signed: the cluster signed it, for the service account it names.
	signed
)

// jwt is what a token's check reads of it.
type jwt struct {
	alg, kid    string
	issuer, sub string
	signed      []byte // header.payload, what the signature covers
	signature   []byte
}

// check says whether the cluster signed token, and for which tenant (the
// service account's namespace, as Identity.Tenant names it).
func (k *serviceAccountKeys) check(ctx context.Context, token string) (tokenCheck, string) {
	if k == nil || k.client == nil {
		return unchecked, ""
	}
	t, ok := parseJWT(token)
	if !ok {
		return unchecked, ""
	}
	issuer, keys := k.current(ctx)
	if issuer == "" || t.issuer != issuer {
		return unchecked, ""
	}
	// The named key first; then the others, as the API server tries them
	// for a token naming none, or one it does not match.
	if key := keys[t.kid]; key != nil && verifySignature(key, t) {
		return signed, (&Identity{User: t.sub}).Tenant()
	}
	for kid, key := range keys {
		if kid != t.kid && verifySignature(key, t) {
			return signed, (&Identity{User: t.sub}).Tenant()
		}
	}
	if keys[t.kid] != nil {
		return forged, ""
	}
	if k.startRead() { // a key the cluster started signing with?
		go k.read(context.WithoutCancel(ctx))
	}
	return unchecked, ""
}

// current is the cluster's issuer and keys, read first by the first
// caller (the others wait for it); "" while they cannot be read.
func (k *serviceAccountKeys) current(ctx context.Context) (string, map[string]crypto.PublicKey) {
	k.mu.Lock()
	never, failed, since := k.fetched.IsZero(), k.failed, k.now().Sub(k.fetched)
	k.mu.Unlock()
	if never || (failed && since >= keysRetryAfterFailure) {
		_, _, _ = k.refresh.Do("keys", func() (any, error) {
			if k.startRead() {
				k.read(ctx)
			}
			return nil, nil
		})
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// A failed read keeps the keys read before: a refresh an unknown key
	// set off and the API server refused must not turn the check off.
	if k.failed && k.keys == nil {
		return "", nil
	}
	return k.issuer, k.keys
}

// startRead claims the next read of the keys: false when they were read
// within keysRefreshEvery, or within keysRetryAfterFailure of a failed
// read, or are being read.
func (k *serviceAccountKeys) startRead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	since := k.now().Sub(k.fetched)
	stale := !k.reading && (k.fetched.IsZero() || since >= keysRefreshEvery && (!k.failed || since >= keysRetryAfterFailure))
	k.reading = k.reading || stale
	return stale
}

// read reads the issuer and keys from the API server (startRead claimed
// it); a failure leaves the keys read before, or, with none, tokens
// unchecked for keysRetryAfterFailure.
func (k *serviceAccountKeys) read(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	issuer, keys, err := k.fetch(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reading = false
	k.fetched = k.now()
	k.failed = err != nil
	if err != nil {
		k.log.Warn("the cluster's service account keys could not be read: tokens are reviewed unchecked, in their hosts' lanes", "err", err)
		return
	}
	k.issuer, k.keys = issuer, keys
}

func (k *serviceAccountKeys) fetch(ctx context.Context) (string, map[string]crypto.PublicKey, error) {
	raw, err := k.client.Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("issuer discovery: %w", err)
	}
	var config struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(raw, &config); err != nil || config.Issuer == "" {
		return "", nil, fmt.Errorf("issuer discovery: no issuer in %q", raw)
	}
	raw, err = k.client.Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("the issuer's keys: %w", err)
	}
	keys, err := parseJWKS(raw)
	if err != nil {
		return "", nil, fmt.Errorf("the issuer's keys: %w", err)
	}
	return config.Issuer, keys, nil
}

// parseJWKS reads the RSA and EC public keys of a JSON Web Key Set by id;
// keys of other types are skipped.
func parseJWKS(raw []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty, Kid, Crv, N, E, X, Y string
		} `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, err
	}
	keys := map[string]crypto.PublicKey{}
	for _, j := range set.Keys {
		switch j.Kty {
		case "RSA":
			n, errN := base64.RawURLEncoding.DecodeString(j.N)
			e, errE := base64.RawURLEncoding.DecodeString(j.E)
			if errN != nil || errE != nil || len(e) == 0 || len(e) > 4 {
				return nil, fmt.Errorf("key %q: malformed RSA key", j.Kid)
			}
			keys[j.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case "EC":
			curve := curves[j.Crv]
			x, errX := base64.RawURLEncoding.DecodeString(j.X)
			y, errY := base64.RawURLEncoding.DecodeString(j.Y)
			if curve == nil || errX != nil || errY != nil {
				return nil, fmt.Errorf("key %q: malformed EC key", j.Kid)
			}
			size := (curve.Params().BitSize + 7) / 8
			point := append(append([]byte{4}, leftPadded(x, size)...), leftPadded(y, size)...)
			key, err := ecdsa.ParseUncompressedPublicKey(curve, point)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", j.Kid, err)
			}
			keys[j.Kid] = key
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no RSA or EC key")
	}
	return keys, nil
}

// leftPadded is b with zeros before it up to size bytes.
func leftPadded(b []byte, size int) []byte {
	if len(b) >= size {
		return b
	}
	return append(make([]byte, size-len(b)), b...)
}

var curves = map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}

// parseJWT reads a compact JWS's header and the claims a check needs,
// without verifying anything.
func parseJWT(token string) (jwt, bool) {
	header, rest, ok := strings.Cut(token, ".")
	if !ok {
		return jwt{}, false
	}
	payload, signature, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(signature, ".") {
		return jwt{}, false
	}
	var t jwt
	var h struct{ Alg, Kid string }
	var c struct{ Iss, Sub string }
	// Strict: one token has one spelling, so that a leaked token cannot be
	// spelled anew for another review (a cache miss) each time.
	b64 := base64.RawURLEncoding.Strict()
	hb, err1 := b64.DecodeString(header)
	pb, err2 := b64.DecodeString(payload)
	sig, err3 := b64.DecodeString(signature)
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &h) != nil || json.Unmarshal(pb, &c) != nil {
		return jwt{}, false
	}
	t.alg, t.kid, t.issuer, t.sub = h.Alg, h.Kid, c.Iss, c.Sub
	t.signed, t.signature = []byte(token[:len(header)+1+len(payload)]), sig
	return t, true
}

// signatureHashes are the hashes of the JWS algorithms a cluster signs
// with.
var signatureHashes = map[string]crypto.Hash{"RS256": crypto.SHA256, "RS384": crypto.SHA384, "RS512": crypto.SHA512,
	"ES256": crypto.SHA256, "ES384": crypto.SHA384, "ES512": crypto.SHA512}

// verifySignature says whether key signed t with t's algorithm, which
// must be the key's kind (no algorithm of another kind, nor "none").
func verifySignature(key crypto.PublicKey, t jwt) bool {
	hash, ok := signatureHashes[t.alg]
	if !ok {
		return false
	}
	h := hash.New()
	h.Write(t.signed)
	digest := h.Sum(nil)
	switch key := key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(t.alg, "RS") && rsa.VerifyPKCS1v15(key, hash, digest, t.signature) == nil
	case *ecdsa.PublicKey:
		size := (key.Curve.Params().BitSize + 7) / 8
		if !strings.HasPrefix(t.alg, "ES") || len(t.signature) != 2*size {
			return false
		}
		r, s := new(big.Int).SetBytes(t.signature[:size]), new(big.Int).SetBytes(t.signature[size:])
		return ecdsa.Verify(key, digest, r, s)
	}
	return false
}

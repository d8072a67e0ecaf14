package main

// postgres: the TLS Secrets opkit's TLS step makes (operators/database/src/controllers/database/tls):
// the Database's CA in <name>-ca (ECDSA P-256, self-signed; owned like the credentials: only under
// deletionPolicy Delete), a server certificate it signs in <name>-server (kubernetes.io/tls, for the
// names in the template; controlled by the Database) and <name>-app (how an application connects, from
// the credentials and the CA; controlled by the Database). Subjects, names, validities and Secret
// layout come from templates.json (measured there from opkit's own pki.ts); generation is crypto/x509.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

type tlsTemplate struct {
	CaCommonName          string        `json:"caCommonName"`
	CaOrganization        string        `json:"caOrganization"`
	BackdateSeconds       int64         `json:"backdateSeconds"`
	CaValiditySeconds     int64         `json:"caValiditySeconds"`
	ServerValiditySeconds int64         `json:"serverValiditySeconds"`
	ServerHosts           []string      `json:"serverHosts"`
	CaSecret              corev1.Secret `json:"caSecret"`
	ServerSecret          corev1.Secret `json:"serverSecret"`
	AppSecret             corev1.Secret `json:"appSecret"`
	AppPasswordKey        string        `json:"appPasswordKey"`
	AppKeys               struct {
		Password string `json:"password"`
		Ca       string `json:"ca"`
		URI      string `json:"uri"`
	} `json:"appKeys"`
}

var (
	oidCommonName   = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrganization = asn1.ObjectIdentifier{2, 5, 4, 10}
)

func serialNumber() (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	b[0] = b[0]&0x7f | 0x10 // positive, 16 bytes
	return new(big.Int).SetBytes(b), nil
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM
	certPem, keyPem []byte
}

// issue signs tmpl with parent (nil: self-signed) for a new P-256 key.
func issue(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, err
	}
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, certPem: pemOf("CERTIFICATE", der), keyPem: pemOf("PRIVATE KEY", pkcs8)}, nil
}

// generateCA: subject CN=<namespace>/<name>, O=<organization>, in that order (as opkit's).
func generateCA(t *tlsTemplate, now time.Time) (*keyPair, error) {
	subject, err := asn1.Marshal(pkix.RDNSequence{
		{{Type: oidCommonName, Value: t.CaCommonName}},
		{{Type: oidOrganization, Value: t.CaOrganization}},
	})
	if err != nil {
		return nil, err
	}
	return issue(&x509.Certificate{
		RawSubject:            subject,
		NotBefore:             now.Add(-time.Duration(t.BackdateSeconds) * time.Second),
		NotAfter:              now.Add(time.Duration(t.CaValiditySeconds) * time.Second),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, nil)
}

// issueServer: for the template's names (the first is the common name), never past the CA's expiry.
func issueServer(t *tlsTemplate, ca *keyPair, now time.Time) (*keyPair, error) {
	notAfter := now.Add(time.Duration(t.ServerValiditySeconds) * time.Second)
	if ca.cert.NotAfter.Before(notAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: t.ServerHosts[0]},
		NotBefore:             now.Add(-time.Duration(t.BackdateSeconds) * time.Second),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range t.ServerHosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return issue(tmpl, ca)
}

// parsePair reads a certificate and its key from a Secret; nil when either is missing or unreadable.
func parsePair(s *corev1.Secret, certKey, keyKey string) *keyPair {
	cb, _ := pem.Decode(s.Data[certKey])
	kb, _ := pem.Decode(s.Data[keyKey])
	if cb == nil || kb == nil {
		return nil
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	key, ok := k.(*ecdsa.PrivateKey)
	if err != nil || !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil
	}
	return &keyPair{cert: cert, key: key, certPem: s.Data[certKey], keyPem: s.Data[keyKey]}
}

// serverUsable: signed by the CA, every name present, more than a third of its validity left (plan.ts).
func serverUsable(t *tlsTemplate, server, ca *keyPair, now time.Time) bool {
	if server == nil || server.cert.CheckSignatureFrom(ca.cert) != nil {
		return false
	}
	have := map[string]bool{}
	for _, n := range server.cert.DNSNames {
		have[n] = true
	}
	for _, ip := range server.cert.IPAddresses {
		have[ip.String()] = true
	}
	for _, h := range t.ServerHosts {
		if !have[h] {
			return false
		}
	}
	validity := server.cert.NotAfter.Sub(server.cert.NotBefore)
	return now.Before(server.cert.NotAfter.Add(-validity / 3))
}

// putSecret creates want (with the controller reference when owned) or patches the data keys that
// differ; an event for each write.
func (r *DatabaseReconciler) putSecret(ctx context.Context, db *Database, want *corev1.Secret, owned bool) (bool, error) {
	live := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKeyFromObject(want), live)
	if apierrors.IsNotFound(err) {
		if owned {
			if err := controllerutil.SetControllerReference(db, want, r.Scheme); err != nil {
				return false, err
			}
		}
		if err := r.Create(ctx, want); err != nil {
			return false, err
		}
		r.event(db, want, corev1.EventTypeNormal, "Created", "Create", "created Secret %s", want.Name)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	patch := client.MergeFrom(live.DeepCopy())
	var keys []string
	if live.Data == nil {
		live.Data = map[string][]byte{}
	}
	for k, v := range want.Data {
		if string(live.Data[k]) != string(v) {
			live.Data[k] = v
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return false, nil
	}
	if err := r.Patch(ctx, live, patch); err != nil {
		return false, err
	}
	r.event(db, live, corev1.EventTypeNormal, "Updated", "Update", "updated Secret %s: %s", live.Name, strings.Join(keys, ", "))
	return true, nil
}

// ensureTLS: the CA (kept while usable), the server certificate (issued when missing or unfit) and
// <name>-app from the credentials Secret.
func (r *DatabaseReconciler) ensureTLS(ctx context.Context, db *Database, d *desired, credentials *corev1.Secret) error {
	t := d.tpl.TLS
	now := time.Now().Truncate(time.Second)
	caLive := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: t.CaSecret.Name}, caLive)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var ca *keyPair
	if err == nil {
		ca = parsePair(caLive, "ca.crt", "ca.key")
		if ca == nil || !ca.cert.IsCA || !now.Before(ca.cert.NotAfter) {
			return fmt.Errorf("secret %s holds no usable CA: the benchmark peer does not replace one", t.CaSecret.Name)
		}
	} else {
		if ca, err = generateCA(t, now); err != nil {
			return err
		}
		s := t.CaSecret.DeepCopy()
		s.Data = map[string][]byte{"ca.crt": ca.certPem, "ca.key": ca.keyPem}
		if _, err := r.putSecret(ctx, db, s, db.Spec.DeletionPolicy == "Delete"); err != nil {
			return err
		}
	}

	serverLive := &corev1.Secret{}
	err = r.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: t.ServerSecret.Name}, serverLive)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var server *keyPair
	if err == nil {
		server = parsePair(serverLive, "tls.crt", "tls.key")
	}
	if !serverUsable(t, server, ca, now) {
		if server, err = issueServer(t, ca, now); err != nil {
			return err
		}
		s := t.ServerSecret.DeepCopy()
		s.Data = map[string][]byte{"tls.crt": server.certPem, "tls.key": server.keyPem, "ca.crt": ca.certPem}
		if _, err := r.putSecret(ctx, db, s, true); err != nil {
			return err
		}
		r.event(db, s, corev1.EventTypeNormal, "CertificateIssued", "Update", "issued the server certificate in Secret %s", s.Name)
	}

	password := credentials.Data[t.AppPasswordKey]
	if len(password) == 0 {
		return errors.New("the credentials Secret has no " + t.AppPasswordKey)
	}
	app := t.AppSecret.DeepCopy()
	app.Data = map[string][]byte{}
	for k, v := range app.StringData {
		app.Data[k] = []byte(strings.ReplaceAll(v, templates.Placeholders.Password, string(password)))
	}
	app.StringData = nil
	app.Data[t.AppKeys.Ca] = ca.certPem
	_, err = r.putSecret(ctx, db, app, true)
	return err
}

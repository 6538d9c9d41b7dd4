package main

// TLS for the secured rows of bench/heartbeat_cost.py (groupcoord-tls, native-tls): with -tls-ca the channels
// are TLS, trusting that CA; with -tls-cert and -tls-key too, they present that client certificate (mTLS, its
// CN the principal the server's ACLs name).

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

var tlsCA, tlsCert, tlsKey string

func init() {
	flag.StringVar(&tlsCA, "tls-ca", "", "grpc: TLS, trusting this PEM CA (default: plaintext)")
	flag.StringVar(&tlsCert, "tls-cert", "", "grpc: with -tls-ca, this PEM client certificate (mTLS)")
	flag.StringVar(&tlsKey, "tls-key", "", "grpc: the client certificate's PEM key")
}

// transportCredentials: plaintext, or TLS from the -tls-* flags (read after flag.Parse).
func transportCredentials() (credentials.TransportCredentials, error) {
	if tlsCA == "" {
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(tlsCA)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-tls-ca %s: no PEM certificate", tlsCA)
	}
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(tlsCert, tlsKey)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(config), nil
}

package cluster

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The CA's files in a cluster directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// Files are where one member's credentials are: the cluster CA's certificate, the
// member's certificate and its private key.
type Files struct {
	CA, Cert, Key string
}

// MemberFiles returns where Issue writes the member of role and name in dir:
// dir/<role>-<name>.crt and .key, next to dir/ca.crt.
func MemberFiles(dir string, role Role, name string) Files {
	base := filepath.Join(dir, string(role)+"-"+name)
	return Files{CA: filepath.Join(dir, CACertFile), Cert: base + ".crt", Key: base + ".key"}
}

// WritePEM writes one PEM block to path with mode, through a temporary file in the
// same directory, so that path never holds half a file and a file that existed
// with a wider mode does not keep it. Unless replace, a path that exists is left
// as it is and the error wraps ErrExists.
func WritePEM(path, typ string, der []byte, mode os.FileMode, replace bool) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-*") // mode 0600 from the start
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = pem.Encode(tmp, &pem.Block{Type: typ, Bytes: der})
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else if err = os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s", ErrExists, path)
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readPEM returns the DER bytes of the one PEM block of type typ in path.
func readPEM(path, typ string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != typ {
		return nil, fmt.Errorf("%s: no PEM block of type %s", path, typ)
	}
	if next, _ := pem.Decode(rest); next != nil {
		return nil, fmt.Errorf("%s: more than one PEM block", path)
	}
	return block.Bytes, nil
}

func readCert(path string) (*x509.Certificate, error) {
	der, err := readPEM(path, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cert, nil
}

func readKey(path string) (*ecdsa.PrivateKey, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", path)
	}
	return ec, nil
}

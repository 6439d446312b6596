package cli

import (
	"io"
	"os"
)

// spoolMemory is how much output a spool holds in memory before it moves
// to a temporary file: the plans of small fusions never touch the disk.
const spoolMemory = 1 << 20

// spooled is write held back until it has succeeded: what it writes goes
// to a spool, copied to the real writer only once write returns nil, so
// that standard output receives all of an output or nothing of it even
// when the output is written as it is made (`lower` writes each op's
// steps once it is lowered, and a later op may still fail). The spool is
// memory up to spoolMemory, then a temporary file, removed at once (the
// output never lingers on the disk).
func spooled(write func(io.Writer) error) func(io.Writer) error {
	return func(w io.Writer) error {
		s := &spool{}
		defer s.close()
		if err := write(s); err != nil {
			return err
		}
		return s.copyTo(w)
	}
}

// spool holds output: in mem, or past spoolMemory in file.
type spool struct {
	mem  []byte
	file *os.File
}

func (s *spool) Write(b []byte) (int, error) {
	if s.file == nil && len(s.mem)+len(b) > spoolMemory {
		s.toFile()
	}
	if s.file != nil {
		return s.file.Write(b)
	}
	s.mem = append(s.mem, b...)
	return len(b), nil
}

// toFile moves the spool to a temporary file, which is removed at once
// where the system lets an open file be (its data lives until it is
// closed); where no temporary file can be made, the spool stays in memory.
func (s *spool) toFile() {
	f, err := os.CreateTemp("", "nvcomm-output-*")
	if err != nil {
		return
	}
	if _, err := f.Write(s.mem); err != nil {
		f.Close()
		os.Remove(f.Name())
		return
	}
	os.Remove(f.Name())
	s.mem, s.file = nil, f
}

// copyTo writes what the spool holds to w.
func (s *spool) copyTo(w io.Writer) error {
	if s.file == nil {
		_, err := w.Write(s.mem)
		return err
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w, s.file)
	return err
}

// close drops the spool.
func (s *spool) close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name()) // already gone where removed at once
	}
}

package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/renameio/v2"
	"github.com/spf13/cobra"

	"github.com/nvcomm/nvcomm/internal/diag"
)

// writeOutput writes data to path, or to standard output when path is "" or
// "-". The error names path as the user gave it, never a temporary file.
func writeOutput(cmd *cobra.Command, path string, data []byte) error {
	return streamOutput(cmd, path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// streamOutput is writeOutput for output that write produces piece by
// piece: a plan goes to its file as it is encoded and is never held whole
// in memory (buffering it took more memory than lowering it). A file is
// still replaced atomically: write fills a temporary file that is renamed
// over path only once write has succeeded, so an error leaves path as it
// was. An error of write itself is returned as it is; one of writing the
// file names path.
func streamOutput(cmd *cobra.Command, path string, write func(io.Writer) error) error {
	if path == "" || path == "-" {
		return buffered(cmd.OutOrStdout(), write)
	}
	warnFormatName(cmd, path)
	var produceErr error
	err := writeFile(path, func(w io.Writer) error {
		ew := &errWriter{w: w}
		err := buffered(ew, write)
		if err != nil && ew.err == nil {
			produceErr = err
		}
		return err
	})
	if produceErr != nil {
		return produceErr
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, pathErr(err))
	}
	return nil
}

// bufferSize is the buffer between a writer and a file: writers that
// write a line at a time (text tables) would otherwise make a system call
// a line.
const bufferSize = 64 << 10

// buffered runs write on a buffer in front of w and flushes it.
func buffered(w io.Writer, write func(io.Writer) error) error {
	bw := bufio.NewWriterSize(w, bufferSize)
	if err := write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// errWriter remembers the first error of its writer, telling a failed
// write of the file from an error of producing the output.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	n, err := e.w.Write(b)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// formatNames are the words that, given to -o, more likely meant an output
// format than a file: `lower -o json` writes a file named "json".
var formatNames = []string{"json", "text", "txt", "yaml", "yml", "csv", "py", "python", "torch"}

// warnFormatName warns, on standard error, when the file that -o names is
// a format's name and does not exist yet: the user most likely meant
// --format (an existing file of that name was meant, and is replaced
// without a word).
func warnFormatName(cmd *cobra.Command, path string) {
	if !slices.Contains(formatNames, strings.ToLower(path)) {
		return
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	hint := "-o takes a file name"
	if f := cmd.Flags().Lookup("format"); f != nil {
		hint = fmt.Sprintf("to choose the output format, use --format (%s)", f.Value.Type())
	}
	warn(cmd, diag.Warn("nvcomm", "writing to a new file named %q; %s", path, hint))
}

// writeFile writes what write produces to path without ever destroying
// what path names.
// A regular file (new or existing) is replaced atomically: a temporary file
// in the same directory, synced, then renamed over it, keeping an existing
// file's permissions, so a failed write leaves the old contents. A symbolic
// link is followed and its target written, so the link survives. Anything
// else — a device such as /dev/null or /dev/full, a FIFO, a socket — is
// opened and written in place: renaming over it would replace the device
// node with a regular file.
func writeFile(path string, write func(io.Writer) error) error {
	target, err := resolveLinks(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return writeAtomic(target, write)
	case err != nil:
		return err
	case fi.IsDir():
		return errors.New("is a directory")
	case fi.Mode().IsRegular():
		return writeAtomic(target, write)
	default:
		return writeInPlace(target, write)
	}
}

// resolveLinks returns the file that path finally names, following symbolic
// links, also when the last link dangles (writing creates its target, as a
// shell redirection would).
func resolveLinks(path string) (string, error) {
	for range 255 { // the kernel's own limit is 40; any cycle ends here
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		dest, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(path), dest)
		}
		path = dest
	}
	return "", errors.New("too many levels of symbolic links")
}

// writeAtomic replaces the regular file at path (or creates it, mode 0644
// less the umask, or an existing file's mode) with what write produces, in
// one rename of a temporary file in the same directory (renameio's pending
// file, as renameio.WriteFile makes it); a failed write removes the
// temporary file and leaves path untouched.
func writeAtomic(path string, write func(io.Writer) error) error {
	f, err := renameio.NewPendingFile(path, renameio.WithPermissions(0o644), renameio.WithExistingPermissions(),
		renameio.WithTempDir(filepath.Dir(path)))
	if err != nil {
		return err
	}
	defer f.Cleanup() // after CloseAtomicallyReplace it does nothing
	if err := write(f); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}

// writeInPlace writes what write produces to an existing file that is not
// a regular file. It never creates one: the file was there when writeFile
// looked.
func writeInPlace(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// pathErr strips the operation and path from an *fs.PathError or
// *os.LinkError, whose path may be a temporary file the user never named.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

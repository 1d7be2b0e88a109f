"""The atomic writer replaces only a regular file (or a symlink): a FIFO, a socket or a
directory at the target is refused before anything is written, with an OSError naming
it. (A device too: a command run as root with ``--out /dev/zero`` once renamed its output
over the device node. No test writes near a real device.)"""

from __future__ import annotations

import errno
import os
import socket
import stat

import pytest

from analysis.atomic import write_text_atomic


def _fifo(tmp_path):
    path = tmp_path / "out.yaml"
    os.mkfifo(path)
    return path


def _socket(tmp_path):
    path = tmp_path / "out.yaml"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()
    return path


def _directory(tmp_path):
    path = tmp_path / "out.yaml"
    path.mkdir()
    return path


@pytest.mark.parametrize("make", [_fifo, _socket, _directory], ids=["fifo", "socket", "dir"])
def test_a_special_file_is_never_replaced(tmp_path, make):
    path = make(tmp_path)
    before = os.lstat(path).st_mode
    with pytest.raises(OSError) as err:
        write_text_atomic(path, "x: 1\n")
    assert err.value.errno == errno.EEXIST and err.value.filename == str(path)
    assert "refusing to replace it" in err.value.strerror
    assert os.lstat(path).st_mode == before and not stat.S_ISREG(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml"]  # no temporary left


def test_a_symlink_is_replaced_and_its_target_kept(tmp_path):
    target = tmp_path / "target.yaml"
    target.write_text("old\n")
    link = tmp_path / "out.yaml"
    link.symlink_to(target)
    write_text_atomic(link, "new\n")
    assert link.read_text() == "new\n" and not link.is_symlink()
    assert target.read_text() == "old\n"

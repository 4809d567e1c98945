"""Write-time confinement of working-tree paths, and finding the working tree.

Each attack puts a marker outside the tree and asserts it is untouched: a
directory swapped for a symlink after the path was checked, a crash followed
by such a swap before recovery, a symlink planted at a temp-file name, a
failed command that replaced a directory with a symlink. The discovery tests
run the real CLI in repositories whose git directory is not ``<top>/.git``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from gitwal import Wal
from gitwal.base.errors import PathRefused
from gitwal.worktree.tree import MODE_FILE

from .conftest import git, init_repo, ok, tree_of, wal

MARKER = b"outside: not gitwal's\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the tree holding a marker file ``f.txt``."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "f.txt").write_bytes(MARKER)
    return d


def swap_for_link(repo: Path, name: str, target: Path) -> None:
    """Replace the directory ``name`` of the tree with a symlink to ``target``."""
    (repo / name).rename(repo / (name + ".moved"))
    (repo / name).symlink_to(target, target_is_directory=True)


def assert_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_bytes() == MARKER


def assert_clean_error(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: "), proc.stderr
    assert needle in proc.stderr, proc.stderr
    assert "hint: " in proc.stderr


def no_temp_files(repo: Path) -> list[str]:
    return sorted(str(p.relative_to(repo)) for p in repo.rglob("*.walt"))


# -- a parent swapped for a symlink ---------------------------------------------------


def test_parent_swapped_after_confine_is_refused_at_the_write(
    tmp_path: Path, outside: Path
) -> None:
    repo = init_repo(tmp_path / "repo", {"sub/f.txt": "old\n"})
    wt = Wal(repo).wt
    rel = wt.confine("sub/f.txt")  # the check passes: sub is a real directory
    swap_for_link(repo, "sub", outside)
    with pytest.raises(PathRefused, match="sub is a symbolic link"):
        wt.write(rel, b"pwned\n", MODE_FILE, "w2")
    with pytest.raises(PathRefused, match="sub is a symbolic link"):
        wt.remove(rel)
    with pytest.raises(PathRefused, match="sub is a symbolic link"):
        wt.clear_temp(rel, "w2")
    assert_untouched(outside)
    assert (repo / "sub.moved" / "f.txt").read_text() == "old\n"


def test_run_apply_confines_under_the_lock(tmp_path: Path, outside: Path) -> None:
    """The run's own step: the swap happens before apply, the refusal is
    clean, and nothing is logged."""
    repo = init_repo(tmp_path / "repo", {"sub/f.txt": "old\n"})
    w = Wal(repo)
    run = w.begin(task="t", run_id="r1")
    swap_for_link(repo, "sub", outside)
    with pytest.raises(PathRefused, match="symbolic link"):
        run.apply("write_file", path="sub/f.txt", content=b"pwned\n")
    assert_untouched(outside)
    assert len(run.records()) == 1


def test_reading_through_a_symlinked_parent_is_refused(tmp_path: Path) -> None:
    """A hostile repository commits ``sub -> $HOME``: the key is never read,
    so it can never reach the log."""
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    repo = init_repo(tmp_path / "repo")
    (repo / "sub").symlink_to(home, target_is_directory=True)
    git(repo, "add", "sub")
    git(repo, "commit", "-q", "-m", "hostile")
    wt = Wal(repo).wt
    with pytest.raises(PathRefused, match="sub is a symbolic link"):
        wt.read("sub/.ssh/id_ed25519")
    with pytest.raises(PathRefused, match="sub is a symbolic link"):
        wt.state("sub/.ssh/id_ed25519")
    ok(repo, "begin", "--task", "t")
    proc = wal(repo, "apply", "ensure-line", "sub/.ssh/id_ed25519", "x")
    assert_clean_error(proc, "refused path")
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"],
                             cwd=repo, capture_output=True, check=True).stdout
    assert b"PRIVATE KEY" not in objects


@pytest.mark.parametrize("redo", [False, True], ids=["recover", "recover-redo"])
def test_recovery_never_writes_through_a_parent_swapped_after_a_crash(
    tmp_path: Path, outside: Path, redo: bool
) -> None:
    repo = init_repo(tmp_path / "repo", {"sub/f.txt": "old\n"})
    ok(repo, "begin", "--task", "t")
    proc = wal(repo, "apply", "write-file", "sub/f.txt", "--from", "-", input=b"new\n",
               env={"GITWAL_CRASH_AT": "after-intent"})
    assert proc.returncode == -signal.SIGKILL
    swap_for_link(repo, "sub", outside)
    proc = wal(repo, "recover", *(["--redo"] if redo else []))
    assert_clean_error(proc, "sub is a symbolic link")
    assert_untouched(outside)
    # Once the directory is back, recovery decides as usual.
    (repo / "sub").unlink()
    (repo / "sub.moved").rename(repo / "sub")
    report = json.loads(ok(repo, "recover", "--json", *(["--redo"] if redo else [])))
    assert [o["action"] for o in report["intents"]] == ["redone" if redo else "aborted"]
    assert (repo / "sub" / "f.txt").read_text() == ("new\n" if redo else "old\n")
    assert_untouched(outside)


# -- temp files ------------------------------------------------------------------------


def test_symlink_at_a_temp_file_name_cannot_redirect_a_write(tmp_path: Path) -> None:
    """The fixed temp name of older versions (`.f.txt.w2.walt` for the first
    step's intent, LSN 2) committed as a link to a dotfile in the home."""
    home = Path(os.environ["HOME"])
    (home / ".bashrc").write_bytes(MARKER)
    repo = init_repo(tmp_path / "repo", {"f.txt": "old\n"})
    (repo / ".f.txt.w2.walt").symlink_to(home / ".bashrc")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hostile")
    ok(repo, "begin", "--task", "t")
    ok(repo, "apply", "write-file", "f.txt", "--from", "-", input=b"new\n")
    assert (home / ".bashrc").read_bytes() == MARKER
    assert not (repo / "f.txt").is_symlink()
    assert (repo / "f.txt").read_bytes() == b"new\n"
    assert os.readlink(repo / ".f.txt.w2.walt") == str(home / ".bashrc")


def test_clear_temp_removes_regular_temp_files_only(tmp_path: Path, outside: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"d/f.txt": "x\n"})
    (repo / "d" / ".f.txt.w5.0123abcd.walt").write_text("torn")
    (repo / "d" / ".f.txt.w5.walt").write_text("torn by an older version")
    (repo / "d" / ".f.txt.w5.link.walt").symlink_to(outside / "f.txt")
    (repo / "d" / ".f.txt.w6.0123abcd.walt").write_text("another step's")
    wt = Wal(repo).wt
    assert wt.clear_temp("d/f.txt", "w5") is True
    assert sorted(p.name for p in (repo / "d").iterdir()) == [
        ".f.txt.w5.link.walt", ".f.txt.w6.0123abcd.walt", "f.txt"]
    assert wt.clear_temp("d/f.txt", "w5") is False
    assert wt.clear_temp("missing/f.txt", "w5") is False
    assert_untouched(outside)


def test_a_failed_write_leaves_no_temp_file(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"d/keep.txt": "k\n"})
    wt = Wal(repo).wt
    with pytest.raises(IsADirectoryError):
        wt.write("d", b"x\n", MODE_FILE, "w2")
    assert no_temp_files(repo) == []
    assert (repo / "d" / "keep.txt").read_text() == "k\n"


def test_temp_names_are_unpredictable(tmp_path: Path) -> None:
    from gitwal.base.durable import temp_name

    names = {temp_name("f.txt", "w2") for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith(".f.txt.w2.") and n.endswith(".walt") for n in names)


# -- failed exec steps ------------------------------------------------------------


def test_failed_exec_that_swapped_a_dir_for_a_symlink_restores_inside(
    tmp_path: Path, outside: Path
) -> None:
    repo = init_repo(tmp_path / "repo", {"d/f.txt": "orig\n", "keep.txt": "k\n"})
    pre = tree_of(repo)
    ok(repo, "begin", "--task", "t")
    script = f"echo changed > d/f.txt && mv d d2 && ln -s {outside} d; exit 1"
    proc = wal(repo, "exec", "--", "sh", "-c", script)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert_untouched(outside)
    assert not (repo / "d").is_symlink()
    assert (repo / "d" / "f.txt").read_text() == "orig\n"
    assert not (repo / "d2").exists()
    assert no_temp_files(repo) == []
    assert tree_of(repo) == pre


def test_failed_exec_that_turned_a_file_into_a_directory_is_restored(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo", {"f": "orig\n", "keep.txt": "k\n"})
    pre = tree_of(repo)
    ok(repo, "begin", "--task", "t")
    proc = wal(repo, "exec", "--", "sh", "-c", "rm f; mkdir f; echo x > f/x; exit 1")
    assert proc.returncode == 1, proc.stderr
    assert "2 changed path(s) restored" in proc.stderr, proc.stderr
    assert (repo / "f").read_text() == "orig\n"
    assert no_temp_files(repo) == []
    assert tree_of(repo) == pre
    rows = [json.loads(x) for x in ok(repo, "log", "--json").splitlines()]
    assert rows[-1]["type"] == "abort"


def test_failed_exec_leaves_a_directory_with_other_files_and_says_so(
    tmp_path: Path
) -> None:
    """``f`` became a directory holding an ignored file the snapshot does not
    list: it cannot be removed safely, so ``f`` is left and reported."""
    repo = init_repo(tmp_path / "repo", {"f": "orig\n", ".gitignore": "*.log\n"})
    ok(repo, "begin", "--task", "t")
    proc = wal(repo, "exec", "--", "sh", "-c",
               "rm f; mkdir f; echo x > f/x; echo l > f/keep.log; exit 1")
    assert proc.returncode == 1, proc.stderr
    assert "left in place" in proc.stderr
    assert "f (a directory holding other files is in the way)" in proc.stderr
    assert (repo / "f" / "keep.log").read_text() == "l\n"
    assert not (repo / "f" / "x").exists()
    assert no_temp_files(repo) == []


# -- finding the working tree -----------------------------------------------------------


def _steps_work(cwd: Path, tree: Path, env: dict[str, str] | None = None) -> None:
    """begin, apply, a crash, recover --redo: all on ``tree``."""
    def run(*args: str, input: bytes | None = None,
            crash: str | None = None) -> subprocess.CompletedProcess[str]:
        extra = dict(env or {}, **({"GITWAL_CRASH_AT": crash} if crash else {}))
        return wal(cwd, *args, input=input, env=extra)

    assert run("begin", "--task", "t").returncode == 0
    proc = run("apply", "write-file", "a.txt", "--from", "-", input=b"a\n")
    assert proc.returncode == 0, proc.stderr
    assert (tree / "a.txt").read_text() == "a\n"
    proc = run("apply", "write-file", "b.txt", "--from", "-", input=b"b\n",
               crash="after-intent")
    assert proc.returncode == -signal.SIGKILL
    proc = run("recover", "--redo", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [o["action"] for o in json.loads(proc.stdout)["intents"]] == ["redone"]
    assert (tree / "b.txt").read_text() == "b\n"


def test_separate_git_dir(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    subprocess.run(["git", "init", "-q", "-b", "main", "--separate-git-dir",
                    str(tmp_path / "store.git"), str(tree)], check=True)
    (tree / "README").write_text("hello\n")
    (tree / "sub").mkdir()
    (tree / "sub" / "x").write_text("x\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "init")
    _steps_work(tree / "sub", tree)
    assert not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
    assert Wal(tree / "sub").wt.root == tree.resolve()


def test_git_dir_and_work_tree_from_the_environment(tmp_path: Path) -> None:
    tree, gitdir, elsewhere = tmp_path / "tree", tmp_path / "store.git", tmp_path / "cwd"
    tree.mkdir()
    elsewhere.mkdir()
    env = {"GIT_DIR": str(gitdir), "GIT_WORK_TREE": str(tree)}
    genv = {**os.environ, **env}
    subprocess.run(["git", "init", "-q", "-b", "main"], env=genv, cwd=elsewhere, check=True)
    (tree / "README").write_text("hello\n")
    subprocess.run(["git", "add", "-A"], env=genv, cwd=elsewhere, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "init"], env=genv, cwd=elsewhere, check=True)
    _steps_work(elsewhere, tree, env)
    # A shell step snapshots the same tree (no .git entry there to find it by).
    proc = wal(elsewhere, "exec", "--", "sh", "-c", f"echo e > {tree}/e.txt", env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == []


def test_linked_worktree(tmp_path: Path) -> None:
    main = init_repo(tmp_path / "main")
    git(main, "worktree", "add", "-q", str(tmp_path / "linked"))
    _steps_work(tmp_path / "linked", tmp_path / "linked")
    assert not (main / "a.txt").exists()


def test_inside_the_git_dir_is_not_a_working_tree(tmp_path: Path) -> None:
    """git itself takes the current directory as the top when GIT_DIR is set;
    inside the git directory that would let a path like ``config`` name
    ``.git/config``: refused."""
    repo = init_repo(tmp_path / "repo")
    before = (repo / ".git" / "config").read_bytes()
    proc = wal(repo / ".git", "begin", "--task", "t", env={"GIT_DIR": "."})
    assert_clean_error(proc, "inside the git directory")
    assert (repo / ".git" / "config").read_bytes() == before


def test_keygen_knows_the_working_tree_of_a_separate_git_dir(tmp_path: Path) -> None:
    """The key-path guard uses the same discovery: a key inside the real tree
    is refused even when the git directory lives elsewhere."""
    tree = tmp_path / "b" / "tree"
    tree.parent.mkdir()
    (tmp_path / "a").mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", "--separate-git-dir",
                    str(tmp_path / "a" / "store.git"), str(tree)], check=True)
    proc = wal(tree, "keygen", "--path", "key")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(
        f"error: refusing to put a signing key inside the repository ({tree.resolve()})")
    assert not (tree / "key").exists()

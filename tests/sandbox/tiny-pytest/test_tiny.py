def test_arithmetic():
    assert sum(range(10)) == 45


def test_scratch_file(tmp_path):
    # pytest's tmp_path lives under the call's own TMPDIR, which the sandbox lets it write.
    (tmp_path / "x").write_text("ok")
    assert (tmp_path / "x").read_text() == "ok"

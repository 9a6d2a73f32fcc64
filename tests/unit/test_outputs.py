"""Where a user points us: the destination is checked before any work, and no file is written through a link."""
import io

import pytest

from reprokit.core.errors import UserError
from reprokit.core.jsonfile import write_json
from reprokit.core.outputs import output_file, output_folder, replace_file, save_figure
from reprokit.study.whatif import predict
from support.study_data import study

pytestmark = pytest.mark.parallel


def planted(tmp_path, name):
    target = tmp_path / "victim"
    target.write_text("keep me")
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "out" / name).symlink_to(target)
    return tmp_path / "out" / name, target


def test_files_replace_a_planted_link_and_never_write_through_it(tmp_path):
    import matplotlib  # noqa: PLC0415  matplotlib: Agg chosen before pyplot
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415  matplotlib: Agg chosen before pyplot

    for name, write in (("a.md", lambda p: replace_file(p, "new")), ("a.json", lambda p: write_json(p, {"x": 1})),
                        ("a.png", lambda p: save_figure(plt.figure(), p))):
        link, target = planted(tmp_path, name)
        write(link)
        assert target.read_text() == "keep me"
        assert link.is_file() and not link.is_symlink()


def test_ck_predict_writes_its_table_and_plot_beside_planted_links_not_through_them(tmp_path):
    table, victim = planted(tmp_path, "predicted-resnet.md")
    plot, _ = planted(tmp_path, "predicted-speedup-resnet.png")
    predict.run({"model": "resnet", "bandwidths": "4gbit", "workers": "4"}, study(), tmp_path / "out",
                console=io.StringIO())
    assert victim.read_text() == "keep me"
    assert not table.is_symlink() and not plot.is_symlink() and "resnet" in table.read_text()


@pytest.mark.parametrize("raw,message", [
    ("/dev/null", "--out_dir=/dev/null is a device or special file, not a folder"),
    ("FILE", "is a file, not a folder; give a folder (it is made if missing)"),
    ("/proc/sys/nothing-here", "cannot write there"),
])
def test_a_destination_that_is_no_writable_folder_is_refused_naming_the_option(tmp_path, raw, message):
    if raw == "FILE":
        raw = str(tmp_path / "a-file")
        (tmp_path / "a-file").write_text("x")
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        output_folder(raw, "--out_dir")


def test_a_missing_folder_is_made_and_an_output_file_is_checked_by_its_folder(tmp_path):
    assert output_folder(tmp_path / "new" / "deeper", "--out_dir").is_dir()
    assert output_file(tmp_path / "x" / "b.tar.gz", "--out") == (tmp_path / "x" / "b.tar.gz").resolve()
    with pytest.raises(UserError, match=r"--out=/proc/b.tar.gz: its folder /proc: cannot write there"):
        output_file("/proc/b.tar.gz", "--out")
    with pytest.raises(UserError, match="is not a file we can write"):
        output_file(tmp_path, "--out")

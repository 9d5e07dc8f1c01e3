"""`mirror verify` (C7): each bad WARC fails with exactly its named check; clean crawls pass."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sqlite3
import zlib
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import warc_fixtures as wf
from aiohttp import web
from conftest import read_records
from warcio.checker import Checker

from mirror.archive import index
from mirror.manifest.writer import Manifest
from mirror.verify import (
    Problem,
    Verdict,
    check_archive,
    format_problems,
    uri_problem,
    verify_warc,
)
from mirror.verify.facts import BATCH

#: fixture -> the checks that must fail on it, and nothing else
CHECKS = {
    "good": set(),
    "torn-member": {"torn-member"},
    "whole-file-gzip": {"not-multi-member-gzip"},
    "not-gzip": {"not-gzip"},
    "gzip-garbage-after": {"gzip-error"},
    "gzip-bad-crc": {"gzip-error", "orphan-request"},  # read on: its request has no response
    "empty-member": {"record-parse"},
    "record-parse": {"record-parse"},
    "warc-version": {"warc-version"},
    "missing-header": {"missing-header"},
    "warc-date": {"warc-date"},
    "length-too-long": {"content-length"},
    "length-too-short": {"content-length"},
    "length-short-digested": {"content-length"},
    "block-digest": {"block-digest"},
    "payload-digest": {"payload-digest"},
    "digest-unknown-algo": {"payload-digest"},
    "chunked-declared": {"chunked"},
    "chunked-kept": {"chunked"},
    "chunked-kept-entity-digest": {"chunked", "payload-digest"},
    "http-content-length": {"http-content-length"},
    "missing-request": {"missing-request"},
    "orphan-request": {"orphan-request"},
    "extra-request": {"extra-request"},
    "concurrent-to": {"concurrent-to"},
    "dangling-revisit": {"revisit-target"},
    "revisit-other-digest": {"revisit-target"},
    "revisit-wrong-refers-to": {"revisit-target"},
    "missing-warcinfo": {"missing-warcinfo"},
    "warcinfo-filename": {"warcinfo-filename"},
    "warcinfo-id": {"warcinfo-id"},
    "duplicate-record-id": {"duplicate-record-id"},
    "target-uri-space": {"target-uri"},
    "target-uri-userinfo": {"target-uri"},
    "target-uri-non-ascii": {"target-uri"},
    "target-uri-brackets": {"target-uri"},
    # other writers' habits that are still right
    "other-digest-encodings": set(),
    "foreign-chunked": set(),
    "foreign-chunked-dechunked-digest": set(),
    "truncated-chunked": set(),
    "large-body": set(),
}
#: what `warcio check` (1.8) passes with exit 0; it fails the rest (or crashes on the torn one)
WARCIO_PASSES = {
    "not-gzip", "empty-member", "warc-version", "missing-header", "warc-date", "length-too-long",
    "length-short-digested", "chunked-declared", "chunked-kept", "http-content-length",
    "missing-request", "orphan-request", "extra-request", "concurrent-to", "dangling-revisit",
    "revisit-other-digest", "revisit-wrong-refers-to", "missing-warcinfo", "warcinfo-filename",
    "warcinfo-id", "duplicate-record-id", "target-uri-space", "target-uri-userinfo",
    "target-uri-non-ascii", "target-uri-brackets",
}
#: right by the WARC standard (payload = entity body, after transfer-coding is removed), and
#: written so by some crawlers, but `warcio check` only knows the digest of the stored bytes
WARCIO_REJECTS = {"foreign-chunked-dechunked-digest"}


def checks(problems: list[Problem] | tuple[Problem, ...]) -> set[str]:
    return {p.check for p in problems}


def test_every_fixture_is_in_the_table() -> None:
    assert set(wf.VARIANTS) == set(CHECKS)


@pytest.mark.parametrize("variant", sorted(CHECKS), ids=sorted(CHECKS))
def test_fixture_fails_with_exactly_its_check(tmp_path: Path, variant: str) -> None:
    problems = list(verify_warc(wf.build(tmp_path, variant)))
    assert checks(problems) == CHECKS[variant], format_problems(problems)
    assert all(p.where.startswith(wf.NAME) for p in problems)


def warcio_check(path: Path) -> int:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            return int(Checker(SimpleNamespace(inputs=[str(path)], verbose=False)).process_all())
        except Exception:  # noqa: BLE001 - warcio 1.8 crashes on a torn member
            return -1


@pytest.mark.parametrize("variant", sorted(set(CHECKS) - {"good"}))
def test_stricter_than_warcio_check(tmp_path: Path, variant: str) -> None:
    path = wf.build(tmp_path, variant)
    passed = warcio_check(path) == 0
    assert passed == (variant in WARCIO_PASSES or not CHECKS[variant]
                      and variant not in WARCIO_REJECTS)


def test_torn_member_names_its_offset(tmp_path: Path) -> None:
    path = wf.build(tmp_path, "torn-member")
    last = len(wf.gz(wf.good_records()[:-1]))
    [problem] = verify_warc(path)
    assert problem.where == f"{wf.NAME}@{last}"
    assert f"ends {path.stat().st_size - last} bytes into" in problem.detail


def test_plain_uncompressed_warc_is_read(tmp_path: Path) -> None:
    records = wf.good_records()
    name = wf.NAME.removesuffix(".gz")
    records[wf.INFO] = wf.set_header(records[wf.INFO], "WARC-Filename", name)
    (tmp_path / name).write_bytes(b"".join(records))
    assert list(verify_warc(tmp_path / name)) == []
    (tmp_path / name).write_bytes(b"".join(records[:3] + [records[3][:-2]] + records[4:]))
    assert checks(list(verify_warc(tmp_path / name))) == {"content-length", "missing-request"}


@pytest.mark.parametrize("uri, ok", [
    ("http://example.com/a?b=c%20d#f", True),
    ("https://[2001:db8::1]:8443/x", True),
    ("dns:example.com", True),
    ("http://example.com/a b", False),
    ("http://example.com/\x7f", False),
    ("http://example.com/caf\u00e9", False),
    ("http://u:p@example.com/", False),
    ("http://example.com/?a[]=1", False),
    ("http://example.com/%zz", False),
    ("<http://example.com/>", False),
    ("example.com/a", False),
    ("http:///a", False),
])
def test_target_uri_rules(uri: str, ok: bool) -> None:
    assert (uri_problem(uri) is None) == ok


def test_format_caps_each_check_and_summary() -> None:
    problems = [Problem(f"index.cdxj:{n}", "index-mismatch", "x") for n in range(25)]
    text = format_problems(problems + [Problem("warc/a", "torn-member", "y")])
    assert text.splitlines()[0] == "index.cdxj:0: index-mismatch: x"
    assert "warc/a: torn-member: y" in text
    assert text.splitlines()[-1] == "... and 5 more index-mismatch problems"
    assert Verdict((), 2, 10).summary() == "verified 2 files, 10 records: OK"
    assert Verdict(tuple(problems[:1]), 1, 1).summary() == "verified 1 file, 1 record: 1 problem"


# -- the archive: files, manifest and index together ------------------------------------------
def revisit_archive(root: Path) -> Path:
    """An archive whose second file holds a revisit of a record in the first."""
    records = wf.good_records()
    second = wf.NAME.replace("00001", "00002")
    info = wf.set_header(records[wf.INFO], "WARC-Filename", second)
    warc = root / "archive" / "warc"
    warc.mkdir(parents=True)
    (warc / wf.NAME).write_bytes(wf.gz(records[:wf.REVISIT]))
    (warc / second).write_bytes(wf.gz([info, *records[wf.REVISIT:]]))
    index.rebuild_from_warcs(warc, root / "archive" / "index.cdxj")
    return warc / second


def test_revisit_resolves_across_files(tmp_path: Path) -> None:
    second = revisit_archive(tmp_path)
    assert checks(list(verify_warc(second))) == {"revisit-target"}  # alone, it points nowhere
    verdict = check_archive(tmp_path / "archive", None)
    assert verdict.problems == ()
    assert (verdict.files, verdict.records) == (2, 10)


def test_index_of_a_hand_made_archive(tmp_path: Path) -> None:
    revisit_archive(tmp_path)
    (tmp_path / "archive" / "index.cdxj").unlink()
    assert checks(check_archive(tmp_path / "archive", None).problems) == {"index-missing"}


async def chunked(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    for part in (b"one ", b"two ", b"three"):
        await response.write(part)
    await response.write_eof()
    return response


async def crawled(make_site, crawl, **sections):  # type: ignore[no-untyped-def]
    site = await make_site()
    site.page("/", '<a href="/a">a</a><a href="/gone">x</a><img src="/i.png"><a href="/c">c</a>')
    site.handler("/c", chunked)
    site.page("/a", "<p>a</p>" * 50, headers={"ETag": '"a1"'})
    site.page("/i.png", b"\x89PNG" + bytes(range(256)) * 8, content_type="image/png")
    c = await crawl([site.base], archive={"warc_max_bytes": 1500}, **sections)
    return c.archive


def verify(archive: Path) -> Verdict:
    manifest = Manifest(archive / "manifest.sqlite3")
    try:
        return check_archive(archive, manifest)
    finally:
        manifest.close()


async def test_clean_crawl_verifies(make_site, crawl) -> None:  # type: ignore[no-untyped-def]
    archive = await crawled(make_site, crawl)
    verdict = verify(archive)
    assert verdict.problems == (), format_problems(verdict.problems)
    files = index.warc_files(archive / "warc")
    assert verdict.files == len(files) > 1
    assert verdict.records == len(files) + 2 * 5  # a warcinfo each, 5 captures of 2 records
    chunked = [r for r in read_records(archive / "warc") if (r["uri"] or "").endswith("/c")]
    assert chunked[0]["http"].get_header("X-Mirror-Orig-Transfer-Encoding") == "chunked"
    assert check_archive(archive, None).problems == ()


async def test_archive_tampering(make_site, crawl) -> None:  # type: ignore[no-untyped-def]
    archive = await crawled(make_site, crawl)
    pristine = archive.parent / "pristine"
    shutil.copytree(archive, pristine)

    def fresh() -> Path:
        shutil.rmtree(archive)
        shutil.copytree(pristine, archive)
        return archive

    for tamper, expected in TAMPERING:
        tamper(fresh())
        problems = verify(archive).problems
        assert checks(problems) == expected, (tamper.__name__, format_problems(problems))


def delete_a_file(archive: Path) -> None:
    index.warc_files(archive / "warc")[0].unlink()


def swap_index_lines(archive: Path) -> None:
    path = archive / "index.cdxj"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([lines[1], lines[0], *lines[2:]]))


def drop_index_line(archive: Path) -> None:
    path = archive / "index.cdxj"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[1:]))


def wrong_offset_in_index(archive: Path) -> None:
    path = archive / "index.cdxj"
    lines = path.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"offset": "', '"offset": "1', 1)
    path.write_text("".join(lines))


def swap_file_names(archive: Path) -> None:
    a, b = index.warc_files(archive / "warc")[:2]
    tmp = a.with_name("tmp")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def leave_an_open_file(archive: Path) -> None:
    (archive / "warc" / "test-20990101000000000-00099.warc.gz.open").write_bytes(b"")


def cut_the_last_file(archive: Path) -> None:
    last = index.warc_files(archive / "warc")[-1]
    os.truncate(last, last.stat().st_size - 10)


def append_a_copied_capture(archive: Path) -> None:
    path = index.warc_files(archive / "warc")[0]
    data = path.read_bytes()
    d = zlib.decompressobj(31)
    d.decompress(data)
    path.write_bytes(data + d.unused_data)  # every capture again, after the warcinfo


TAMPERING = [
    (delete_a_file, {"manifest-missing-file", "index-mismatch", "index-readback"}),
    (swap_index_lines, {"index-unsorted"}),
    (drop_index_line, {"index-mismatch"}),
    (wrong_offset_in_index, {"index-mismatch", "index-readback"}),
    (swap_file_names, {"warcinfo-filename", "manifest-record", "manifest-unrecorded",
                       "index-mismatch", "index-readback"}),
    (leave_an_open_file, {"open-file"}),
    (cut_the_last_file, {"torn-member", "manifest-record"}),  # a request record: not indexed
    (append_a_copied_capture, {"duplicate-record-id", "manifest-unrecorded",
                               "index-mismatch"}),
]


# -- the manifest's record_type and original_id against the records ----------------------------
async def conditional(request: web.Request) -> web.StreamResponse:
    """/n: 304 when the crawler sends back its ETag, so a second run stores a not-modified."""
    if request.headers.get("If-None-Match") == '"n1"':
        return web.Response(status=304, headers={"ETag": '"n1"'})
    return web.Response(text="<p>n</p>", content_type="text/html", headers={"ETag": '"n1"'})


async def two_runs(make_site, crawl) -> Path:  # type: ignore[no-untyped-def]
    """An archive of two runs of the same site: the second stores revisits and a not-modified."""
    site = await make_site()
    site.page("/", '<a href="/n">n</a><img src="/i.png">')
    site.handler("/n", conditional)
    site.page("/i.png", b"\x89PNG" + bytes(range(256)) * 8, content_type="image/png")
    for _ in range(2):
        c = await crawl([site.base])
    return c.archive


def capture_rows(archive: Path) -> list[sqlite3.Row]:
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db:
        db.row_factory = sqlite3.Row
        return db.execute("SELECT * FROM captures ORDER BY id").fetchall()


def set_row(archive: Path, capture_id: int, **values: object) -> None:
    columns = ", ".join(f"{name} = ?" for name in values)
    with contextlib.closing(sqlite3.connect(archive / "manifest.sqlite3")) as db, db:
        db.execute(f"UPDATE captures SET {columns} WHERE id = ?",  # noqa: S608 - test names
                   (*values.values(), capture_id))


def one_of(rows: list[sqlite3.Row], record_type: str) -> sqlite3.Row:
    return next(r for r in rows if r["record_type"] == record_type)


async def test_two_runs_verify(make_site, crawl) -> None:  # type: ignore[no-untyped-def]
    archive = await two_runs(make_site, crawl)
    kinds = Counter(r["record_type"] for r in capture_rows(archive))
    assert kinds == {"response": 3, "revisit": 2, "not-modified": 1}
    verdict = verify(archive)
    assert verdict.problems == (), format_problems(verdict.problems)


async def test_adopted_revisit_recorded_as_response(  # type: ignore[no-untyped-def]
        make_site, crawl) -> None:
    """What crash recovery's adoption once wrote: a revisit record as a response row."""
    archive = await two_runs(make_site, crawl)
    row = one_of(capture_rows(archive), "revisit")
    set_row(archive, row["id"], record_type="response", original_id=None)
    assert verify(archive).problems == (Problem(
        f"manifest: capture {row['id']}", "manifest-record-type",
        "the manifest says response, the record is a revisit (identical-payload-digest)"),)


async def test_record_type_and_original_id_mismatches(  # type: ignore[no-untyped-def]
        make_site, crawl) -> None:
    archive = await two_runs(make_site, crawl)
    pristine = archive.parent / "pristine"
    shutil.copytree(archive, pristine)
    rows = capture_rows(archive)
    response, revisit = one_of(rows, "response"), one_of(rows, "revisit")
    other = next(r for r in rows if r["record_type"] == "response"
                 and r["id"] != revisit["original_id"])
    not_modified = one_of(rows, "not-modified")
    refers_to = next(r["record_id"] for r in rows if r["id"] == revisit["original_id"])
    cases = [
        (response, {"record_type": "not-modified", "original_id": other["id"]},
         "the manifest says not-modified, the record is a response"),
        (not_modified, {"record_type": "revisit"},
         "the manifest says revisit, the record is a revisit (server-not-modified)"),
        (revisit, {"original_id": other["id"]},
         f"original_id {other['id']} is the capture of {other['record_id']}, but WARC-Refers-To "
         f"is {refers_to}"),
        (revisit, {"original_id": None},
         f"the manifest says revisit with no original_id; WARC-Refers-To is {refers_to}"),
        (not_modified, {"original_id": 999}, "original_id 999 names no capture in the manifest"),
        (response, {"original_id": other["id"]},
         f"the manifest says response with original_id {other['id']}; only revisits have one"),
    ]
    for row, values, detail in cases:
        shutil.rmtree(archive)
        shutil.copytree(pristine, archive)
        set_row(archive, row["id"], **values)
        problems = verify(archive).problems
        assert problems == (Problem(f"manifest: capture {row['id']}", "manifest-record-type",
                                    detail),), format_problems(problems)


async def test_record_type_next_to_other_field_mismatches(  # type: ignore[no-untyped-def]
        make_site, crawl) -> None:
    """A row that names another capture's record: each disagreement under its own check."""
    archive = await two_runs(make_site, crawl)
    rows = capture_rows(archive)
    response, revisit = one_of(rows, "response"), one_of(rows, "revisit")
    set_row(archive, response["id"], filename=revisit["filename"], offset=revisit["offset"],
            length=revisit["length"])
    problems = verify(archive).problems
    assert checks(problems) == {"manifest-record", "manifest-record-type", "manifest-unrecorded"}
    assert [p.detail for p in problems if p.check == "manifest-record-type"] == [
        "the manifest says response, the record is a revisit (identical-payload-digest)"]


def test_a_reused_record_id_is_found_within_and_across_batches(tmp_path: Path) -> None:
    """Record ids are checked a batch at a time (verify/facts.py): a file of more than two
    batches, where the warcinfo's id comes back just after it, across the first batch's
    end and at the file's end, and a metadata record's id comes back in its own batch: each
    reuse is said where it is, and nothing else."""
    records = wf.good_records()
    info_id = wf.header(records[wf.INFO], "WARC-Record-ID")
    filler = [wf.set_header(records[wf.INFO], "WARC-Record-ID", f"<urn:uuid:fill-{i}>")
              for i in range(2 * BATCH + 50)]
    again = records[wf.INFO]
    extra = wf.set_header(records[wf.INFO], "WARC-Record-ID", "<urn:uuid:twice>")
    body = ([records[wf.INFO], again] + filler[:BATCH - 5] + [again] + filler[BATCH - 5:]
            + [extra, extra] + records[1:] + [again])
    path = tmp_path / wf.NAME
    path.write_bytes(wf.gz(body))
    found = [p for p in verify_warc(path) if p.check == "duplicate-record-id"]
    starts = [0]
    for record in body:
        starts.append(starts[-1] + len(wf.gz([record])))
    reused = [i for i, r in enumerate(body) if r is again and i > 0] + [body.index(extra) + 1]
    assert sorted(p.where for p in found) == sorted(f"{wf.NAME}@{starts[i]}" for i in reused)
    assert {p.detail for p in found} == {f"{info_id} is used twice in this file",
                                         "<urn:uuid:twice> is used twice in this file"}
    assert len(found) == 4

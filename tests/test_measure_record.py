"""The record a benchmark writes beside its figures (electra_tf/measure/record.py)."""

import json

from electra_tf.measure import record


def test_machine_reads_the_cpu_its_speed_flags_and_memory(tmp_path):
  cpuinfo = tmp_path / "cpuinfo"
  cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B14\n"
                     "flags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16\n\n"
                     "processor\t: 1\nmodel name\t: AMD EPYC 9B14\nflags\t\t: fpu\n")
  meminfo = tmp_path / "meminfo"
  meminfo.write_text("MemTotal:       24641536 kB\nMemFree:        1 kB\n")
  found = record.machine(str(cpuinfo), str(meminfo))
  assert found["cpu"] == "AMD EPYC 9B14"
  assert found["cpu_flags"] == ["avx2", "avx512f", "avx512_bf16"]
  assert found["memory_gb"] == 23.5 and 1 <= found["cores"] <= found["cpus"]
  assert len(found["load_average"]) == 3


def test_record_names_the_command_the_commit_and_the_result(tmp_path, repo_root):
  path = tmp_path / "out.json"
  started = record.utc_now()
  written = record.write_record(str(path), {"seq_per_sec": 9.3}, started,
                                argv=["prog", "--steps=5", "--pairs=3"])
  assert json.loads(path.read_text()) == written
  assert written["result"] == {"seq_per_sec": 9.3}
  assert written["command"].endswith(" --steps=5 --pairs=3")
  assert written["started"] <= written["date"] and written["date"].endswith("Z")
  head = (repo_root / ".git").exists() and record.commit(repo_root)
  if head:  # a git checkout (a worktree's .git is a file)
    assert len(head.split("+")[0]) == 40
  assert record.commit(tmp_path) is None

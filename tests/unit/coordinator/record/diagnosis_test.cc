#include "coordinator/record/diagnosis.h"

#include <gtest/gtest.h>

namespace trl {
namespace {

namespace pb = trl::launch::v1;

// 2026-12-07 00:41:02.123 UTC, and `ms` later.
pb::JobEvent Event(int64_t generation, const std::string& kind,
                   const std::string& text, int machine = -1, int64_t ms = 0) {
  pb::JobEvent event;
  event.set_unix_ms(1796604062123 + ms);
  event.set_generation(generation);
  event.set_kind(kind);
  event.set_machine_rank(machine);
  event.set_text(text);
  return event;
}

pb::JobEvents HungThenFinished() {
  pb::JobEvents events;
  *events.add_events() = Event(-1, "registered", "host node01", 0);
  *events.add_events() = Event(-1, "registered", "host node02", 1);
  *events.add_events() =
      Event(0, "generation", "world size 4, restarts used 0 of 1");
  *events.add_events() = Event(
      0, "stopping",
      "rank 3 (local rank 1 on machine 1, host node02) hung: its processes "
      "used less than 1% of a core for 3.0 s (--hang_cpu_timeout 3)",
      -1, 6333);
  *events.add_events() = Event(
      0, "stood",
      "ranks 0-2 in all_reduce (torch/distributed/distributed_c10d.py:4181), "
      "from job.py:13; rank 3 on machine 1 (host node02) in <module> "
      "(job.py:11), the odd one out",
      -1, 6400);
  *events.add_events() =
      Event(1, "generation", "world size 4, restarts used 1 of 1", -1, 7000);
  *events.add_events() = Event(
      1, "finished", "succeeded (exit code 0): every rank exited 0", -1, 9000);
  return events;
}

TEST(DiagnosisTest, SaysWhyAGenerationStoppedAndWhereEachRankStood) {
  EXPECT_EQ(
      DiagnoseJob(HungThenFinished()),
      "generation 0 (world size 4, restarts used 0 of 1), started "
      "00:41:02.123\n"
      "  stopped 00:41:08.456: rank 3 (local rank 1 on machine 1, host "
      "node02) hung: its processes used less than 1% of a core for 3.0 s "
      "(--hang_cpu_timeout 3)\n"
      "  where its ranks stood:\n"
      "    ranks 0-2 in all_reduce (torch/distributed/distributed_c10d.py:4181)"
      ", from job.py:13\n"
      "    rank 3 on machine 1 (host node02) in <module> (job.py:11), the odd "
      "one out\n"
      "generation 1 (world size 4, restarts used 1 of 1), started "
      "00:41:09.123\n"
      "  job ended 00:41:11.123: succeeded (exit code 0): every rank exited "
      "0\n");
}

TEST(DiagnosisTest, NothingATerminalWouldActOnIsPrinted) {
  pb::JobEvents events;
  *events.add_events() = Event(0, "generation", "world size 1\x1b[2J");
  *events.add_events() = Event(0, "stopping", "rank 0\x1b]0;owned\x07 hung");
  *events.add_events() = Event(0, "stood",
                               "rank 0 in f (\xC2\x9B"
                               "6n.py:1)");
  const std::string said = DiagnoseJob(events);
  EXPECT_EQ(said.find('\x1b'), std::string::npos) << said;
  EXPECT_EQ(said.find('\x07'), std::string::npos) << said;
  EXPECT_EQ(said.find("\xC2\x9B"), std::string::npos) << said;
  EXPECT_NE(said.find("rank 0 ]0;owned  hung"), std::string::npos) << said;
}

TEST(DiagnosisTest, TheLastStoppedGeneration) {
  EXPECT_EQ(LastStoppedGeneration(HungThenFinished()), 0);
  EXPECT_EQ(LastStoppedGeneration(pb::JobEvents()), -1);
}

TEST(DiagnosisTest, OneGenerationAndAQuietOne) {
  pb::JobEvents events = HungThenFinished();
  const std::string first = DiagnoseJob(events, 0);
  EXPECT_EQ(first.find("generation 1"), std::string::npos) << first;
  EXPECT_NE(first.find("the odd one out"), std::string::npos) << first;
  events.mutable_events()->RemoveLast();  // generation 1 is still running
  EXPECT_EQ(DiagnoseJob(events, 1),
            "generation 1 (world size 4, restarts used 1 of 1), started "
            "00:41:09.123\n  nothing went wrong in it\n");
  EXPECT_EQ(DiagnoseJob(events, 7), "no events of generation 7\n");
  EXPECT_EQ(DiagnoseJob(pb::JobEvents()), "no generation has started yet\n");
}

TEST(DiagnosisTest, ALostMachineAndWhatCameBeforeTheFirstGeneration) {
  pb::JobEvents events;
  *events.add_events() =
      Event(-1, "unhealthy", "machine 1 (host node02): disk full", 1);
  *events.add_events() = Event(0, "generation",
                               "world size 2, restarts used "
                               "0 of 0");
  *events.add_events() = Event(0, "lost", "no heartbeat for 3.0 s", 1, 1000);
  events.set_left_out(12);
  EXPECT_EQ(DiagnoseJob(events),
            "(the 12 oldest events are no longer kept)\n"
            "before the first generation\n"
            "  unhealthy 00:41:02.123: machine 1 (host node02): disk full\n"
            "generation 0 (world size 2, restarts used 0 of 0), started "
            "00:41:02.123\n"
            "  lost 00:41:03.123: machine 1: no heartbeat for 3.0 s\n");
}

}  // namespace
}  // namespace trl

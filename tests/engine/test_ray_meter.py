"""Which monitor books a machine that several Ray nodes share (no Ray needed)."""

from __future__ import annotations

from basht.engine.ray.actor import machine_of, process_view
from basht.engine.ray.meter import NodeMeters
from basht.experiment import MeasureSpec, ResourcesSpec


def test_the_first_monitor_on_a_machine_books_it_and_later_meters_there_are_its_guests():
    meters = NodeMeters(MeasureSpec(energy="estimate"), ResourcesSpec(workers=4))
    meters._driver_machine = "boot-a"
    assert meters._owner("boot-a", "node-1") == ""  # the driver's machine: the driver books it
    assert meters._owner("boot-b", "node-2") is None  # the first meter on boot-b owns it
    assert meters._owner("boot-b", "node-3") == "node-2"
    assert meters._owner("boot-b", "node-2") is None  # asked again, still the owner
    assert meters._owner(None, "node-4") is None  # a machine unknown: its own


def test_a_machine_is_the_kernel_boot_of_a_process_view():
    view = process_view()
    assert machine_of(view) == view.split(" ")[0] and machine_of(None) is None
    assert machine_of(f"{machine_of(view)} pid:[4026531836]") == machine_of(view)

extends Node3D
## The gsrelay demo: each player moves a capsule with the arrow keys and sees every other
## player's capsule move. Start a relay (`cargo run --release -- serve` prints a token),
## then run two or more copies:
##
##   godot --path bindings/godot/demo -- --url=http://127.0.0.1:8080 --token=eyJ... --room=dev
##
## (or set GSRELAY_URL, GSRELAY_TOKEN and GSRELAY_ROOM). Each publishes its capsule as a
## Head1 at 20 Hz with its velocity; the others move it between updates with that
## velocity, and take it away when its player leaves.

const SPEED := 4.0  # metres per second
const SEND_HZ := 20.0
const HEAD_ID := 1

## What remote players look like.
@export var remote_mesh: Mesh
@export var remote_material: Material

## "ssrc:object_id" -> {node, position, velocity, at (seconds)} of each remote head.
var remote := {}
var velocity := Vector3.ZERO
var since_sent := 0.0
var room_name := ""

@onready var room: GsRelayRoom = $Room
@onready var player: MeshInstance3D = $Player
@onready var status: Label = $Status


func _ready() -> void:
	room.joined.connect(_on_joined)
	room.object_updated.connect(_on_object_updated)
	room.object_removed.connect(_on_object_removed)
	room.rejoined.connect(_on_rejoined)
	room.session_error.connect(_on_session_error)
	room.ended.connect(_on_ended)
	var url := _setting("url", "GSRELAY_URL", "http://127.0.0.1:8080")
	var token := _setting("token", "GSRELAY_TOKEN", "")
	room_name = _setting("room", "GSRELAY_ROOM", "dev")
	if room.join(url, token, room_name) != OK:
		status.text = "cannot join: " + room.get_last_error()
	else:
		status.text = "joining %s at %s..." % [room_name, url]


func _process(delta: float) -> void:
	var input := Input.get_vector("ui_left", "ui_right", "ui_up", "ui_down")
	velocity = Vector3(input.x, 0.0, input.y) * SPEED
	player.position += velocity * delta
	if velocity.length() > 0.01:
		# Face where it goes (Godot's forward is -Z).
		player.rotation = Vector3(0.0, atan2(-velocity.x, -velocity.z), 0.0)
	since_sent += delta
	if room.is_joined() and since_sent >= 1.0 / SEND_HZ:
		since_sent = 0.0
		room.publish_head(HEAD_ID, player.position, player.quaternion, velocity)
	# Between updates, remote players keep moving with the velocity they sent.
	var now := Time.get_ticks_msec() / 1000.0
	for key in remote:
		var r: Dictionary = remote[key]
		r.node.position = r.position + r.velocity * (now - r.at)


func _on_joined(ssrc: int, session_id: String) -> void:
	status.text = "in %s as SSRC %d (session %s)" % [room_name, ssrc, session_id]


func _on_object_updated(
	ssrc: int, object_id: int, kind: String, where: Vector3, turn: Quaternion, details: Dictionary
) -> void:
	if kind != "head1":
		return
	var key: String = "%d:%d" % [ssrc, object_id]
	if not remote.has(key):
		var node := MeshInstance3D.new()
		node.mesh = remote_mesh
		node.material_override = remote_material
		add_child(node)
		remote[key] = {"node": node}
	var r: Dictionary = remote[key]
	r.position = where
	r.velocity = details.get("velocity", Vector3.ZERO)
	r.at = Time.get_ticks_msec() / 1000.0
	r.node.position = where
	r.node.quaternion = turn


func _on_object_removed(ssrc: int, object_id: int) -> void:
	var key: String = "%d:%d" % [ssrc, object_id]
	if remote.has(key):
		remote[key].node.queue_free()
		remote.erase(key)


func _on_rejoined(ssrc: int, same_ssrc: bool) -> void:
	status.text = "back in %s as SSRC %d%s" % [room_name, ssrc, "" if same_ssrc else " (new)"]


func _on_session_error(code: int, message: String) -> void:
	push_warning("gsrelay: %s (%d)" % [message, code])


func _on_ended(reason: String, message: String) -> void:
	status.text = "session ended (%s): %s" % [reason, message]


## A setting from `-- --name=value` on the command line, else the environment, else
## `fallback`.
func _setting(option: String, variable: String, fallback: String) -> String:
	for arg in OS.get_cmdline_user_args():
		if arg.begins_with("--%s=" % option):
			return arg.split("=", true, 1)[1]
	var value := OS.get_environment(variable)
	return value if value != "" else fallback

//! The Wi-Fi onboarding portal on the chip: with no Wi-Fi network set, or the boot button held
//! at power-on, the chip opens the access point `Chela-XXXX` (WPA2, a fresh password printed on
//! the serial console) at 192.168.4.1, hands out addresses (`chela_chip::dhcp`), and serves the
//! setup page on port 80 (the page, the form and what is saved are `chela_chip::portal`'s).
//! Saving restarts the chip in station mode. The serial console stays live meanwhile.

use chela_chip::portal::{self, Access};
use chela_chip::turn::Chip;
use chela_chip::{dhcp, say};
use chela_core::console::Console;
use core::net::Ipv4Addr;
use embassy_executor::Spawner;
use embassy_futures::select::{Either, select};
use embassy_net::tcp::TcpSocket;
use embassy_net::udp::{PacketMetadata, UdpSocket};
use embassy_net::{Ipv4Cidr, Stack, StackResources, StaticConfigV4};
use embassy_time::{Duration, Instant, Timer, with_timeout};
use embedded_io_async::Write;
use esp_hal::rng::Rng;
use esp_radio::wifi::ap::AccessPointConfig;
use esp_radio::wifi::{AuthenticationMethodConfig, Config, ControllerConfig, Interface, WifiController};

use crate::board::Esp;
use crate::flash::Partition;
use crate::serial;

const ADDRESS: [u8; 4] = [192, 168, 4, 1];
/// A client has this long to send its request.
const REQUEST_WAIT: Duration = Duration::from_secs(10);

/// Whether the boot button (GPIO9 on both dev boards, low when pressed) is held now.
pub fn button_held(pin: esp_hal::peripherals::GPIO9<'_>) -> bool {
    use esp_hal::gpio::{Input, InputConfig, Pull};
    Input::new(pin, InputConfig::default().with_pull(Pull::Up)).is_low()
}

/// Runs the portal until the settings are saved, then restarts; returns only when the radio
/// could not start the access point (saying why).
pub async fn run(
    spawner: Spawner,
    wifi: esp_hal::peripherals::WIFI<'static>,
    chip: &mut Chip<Partition, Esp>,
    console: &mut Console,
    seed: u64,
) -> &'static str {
    let Ok(mut controller) = WifiController::new(wifi, ControllerConfig::default()) else {
        return "the WiFi radio did not start";
    };
    let iface = Interface::access_point();
    let ssid = portal::ap_ssid(iface.mac_address());
    let mut random = [0u8; 12];
    Rng::new().read(&mut random);
    let password = portal::ap_password(random);
    let (Ok(s), Ok(p)) = (ssid.as_str().try_into(), password.as_str().try_into()) else {
        return "the access point's name or password does not fit the radio";
    };
    let ap = AccessPointConfig::default().with_ssid(s).with_authentication(AuthenticationMethodConfig::Wpa2Personal(p));
    if controller.set_config(&Config::AccessPoint(ap)).is_err() {
        return "the radio refused the access point's settings";
    }
    let address = Ipv4Addr::from(ADDRESS);
    let config = StaticConfigV4 { address: Ipv4Cidr::new(address, 24), gateway: None, dns_servers: Default::default() };
    // On the heap: set-up mode ends in a restart, and its network is not the station's, so its
    // buffers need no static RAM beside the station's.
    let resources = alloc::boxed::Box::leak(alloc::boxed::Box::new(StackResources::<3>::new()));
    let (stack, runner) = embassy_net::new(iface, embassy_net::Config::ipv4_static(config), resources, seed);
    match (crate::net_task(runner), dhcp_task(stack)) {
        (Ok(n), Ok(d)) => {
            spawner.spawn(n);
            spawner.spawn(d);
        }
        _ => return "the access point's network tasks did not start",
    }
    say!(
        &Esp,
        "[portal] set-up mode: join the Wi-Fi network \"{ssid}\" with the password {password} and open \
         http://{address}/ (or set wifi_set on this console)"
    );
    let (mut rx, mut tx) = ([0u8; 1024], [0u8; 2048]);
    loop {
        let mut sock = TcpSocket::new(stack, &mut rx, &mut tx);
        sock.set_timeout(Some(REQUEST_WAIT));
        let mut typed = [0u8; 64];
        match select(sock.accept(80), serial::read(&mut typed)).await {
            Either::First(Ok(())) => {}
            Either::First(Err(_)) => continue,
            Either::Second(n) => {
                let bytes = typed;
                crate::console_bytes(chip, console, &bytes[..n], None);
                if !portal::wanted(&chip.config, false) {
                    say!(&Esp, "[portal] a Wi-Fi network was set on the console: restarting to join it");
                    esp_hal::system::software_reset()
                }
                continue;
            }
        }
        let restart = with_timeout(REQUEST_WAIT, serve(&mut sock, chip)).await.unwrap_or(false);
        let _ = sock.flush().await;
        sock.close();
        if restart {
            say!(&Esp, "[portal] saved: restarting to join the network");
            Timer::after(Duration::from_millis(500)).await;
            esp_hal::system::software_reset()
        }
        sock.abort();
        // The controller stays alive (and the access point up) while this loop runs.
        let _ = &controller;
    }
}

/// Answers one request; whether the settings were saved.
async fn serve(sock: &mut TcpSocket<'_>, chip: &mut Chip<Partition, Esp>) -> bool {
    let mut req = alloc::vec::Vec::new();
    let mut buf = [0u8; 256];
    let head = loop {
        match portal::head_len(&req) {
            Ok(Some(end)) => match portal::parse_head(&req[..end]) {
                Ok(h) => break (h, end),
                Err(e) => return answer(sock, &e.response()).await,
            },
            Ok(None) => {}
            Err(e) => return answer(sock, &e.response()).await,
        }
        match sock.read(&mut buf).await {
            Ok(n) if n > 0 => req.extend_from_slice(&buf[..n]),
            _ => return false,
        }
    };
    let (head, end) = head;
    // The body, at most `portal::MAX_BODY` (parse_head refused a longer Content-Length).
    while req.len() < end + head.content_length {
        match sock.read(&mut buf).await {
            Ok(n) if n > 0 => req.extend_from_slice(&buf[..n]),
            _ => return false,
        }
    }
    let body = &req[end..end + head.content_length];
    let response = portal::handle(&head, body, Access::AccessPoint, &mut chip.store, &mut chip.config);
    answer(sock, &response).await
}

async fn answer(sock: &mut TcpSocket<'_>, r: &portal::Response) -> bool {
    let _ = sock.write_all(&r.to_http()).await;
    r.restart
}

/// Hands out addresses to whoever joins the access point.
#[embassy_executor::task]
async fn dhcp_task(stack: Stack<'static>) {
    // On the heap, not in the task's static pool: only set-up mode runs this task.
    let (mut rx_meta, mut tx_meta) = (alloc::vec![PacketMetadata::EMPTY; 4], alloc::vec![PacketMetadata::EMPTY; 4]);
    let mut buffers = alloc::vec![0u8; 1024 + 1024 + 600];
    let (rx, rest) = buffers.split_at_mut(1024);
    let (tx, buf) = rest.split_at_mut(1024);
    let mut socket = UdpSocket::new(stack, &mut rx_meta, rx, &mut tx_meta, tx);
    if socket.bind(dhcp::SERVER_PORT).is_err() {
        return say!(&Esp, "[portal] the DHCP port could not be opened");
    }
    let mut server = dhcp::Server::new(ADDRESS);
    loop {
        let Ok((n, _)) = socket.recv_from(buf).await else { continue };
        if let Some(reply) = server.handle(&buf[..n], Instant::now().as_secs()) {
            let _ = socket.send_to(&reply, (Ipv4Addr::BROADCAST, dhcp::CLIENT_PORT)).await;
        }
    }
}

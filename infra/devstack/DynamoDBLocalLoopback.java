// Starts DynamoDB Local listening on 127.0.0.1 only; infra/devstack runs it with
// DynamoDBLocal.jar and DynamoDBLocal_lib/* on the class path and DynamoDB Local's own
// arguments (-inMemory -sharedDb -disableTelemetry -port N).
//
// DynamoDB Local has no bind-address option: its DynamoDBProxyServer creates
// `new org.eclipse.jetty.server.Server(port)`, whose one connector listens on every interface.
// So this builds the server as DynamoDB Local's main() does
// (ServerRunner.createServerFromCommandLineArgs), reaches the Jetty server in its private
// field `server`, sets each connector's host to 127.0.0.1 before anything listens, starts it,
// and checks the address each connector is bound to. Whatever does not go as expected (the
// field renamed in a newer jar, a connector of another kind, a bound address other than
// 127.0.0.1) ends the process with status 1 and a message naming the problem, instead of
// listening on every interface.
//
// Unlike main(), this never configures DynamoDB Local's telemetry, so none is sent whatever the
// arguments say; and a port it cannot bind ends the process with status 1 (main() prints the
// error and exits 0).

import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.util.Arrays;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class DynamoDBLocalLoopback {
    static final String HOST = "127.0.0.1";

    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy;
        try {
            proxy = ServerRunner.createServerFromCommandLineArgs(args);
        } catch (Exception e) {
            throw die("DynamoDB Local refused the arguments " + Arrays.toString(args) + ": " + e);
        }
        Server jetty = jettyServer(proxy);
        Connector[] connectors = jetty.getConnectors();
        if (connectors.length == 0) {
            throw die("DynamoDB Local's Jetty server has no connector to bind to " + HOST);
        }
        for (Connector c : connectors) {
            if (!(c instanceof ServerConnector)) {
                throw die("DynamoDB Local's Jetty server has a connector of type " + c.getClass().getName()
                        + ", not a ServerConnector: cannot bind it to " + HOST);
            }
            ((ServerConnector) c).setHost(HOST);
        }

        // safeStart() is Jetty's start() alone: it throws when the port cannot be bound.
        proxy.safeStart();

        InetAddress want = InetAddress.getByName(HOST);
        for (Connector c : connectors) {
            Object transport = ((ServerConnector) c).getTransport();
            SocketAddress bound = transport instanceof ServerSocketChannel
                    ? ((ServerSocketChannel) transport).getLocalAddress()
                    : null;
            if (!(bound instanceof InetSocketAddress) || !((InetSocketAddress) bound).getAddress().equals(want)) {
                proxy.stop();
                throw die("DynamoDB Local is listening on " + bound + ", not on " + HOST + "; stopped it");
            }
            System.out.println("DynamoDB Local listening on " + bound);
        }
        proxy.join();
    }

    // jettyServer returns the Jetty server in DynamoDBProxyServer's private field "server".
    static Server jettyServer(DynamoDBProxyServer proxy) {
        String where = DynamoDBProxyServer.class.getName() + ".server";
        Field f;
        try {
            f = DynamoDBProxyServer.class.getDeclaredField("server");
        } catch (NoSuchFieldException e) {
            throw die("there is no field " + where + " in this DynamoDB Local jar (renamed in a newer version?), "
                    + "so its Jetty server cannot be reached to bind it to " + HOST);
        }
        if (!Server.class.isAssignableFrom(f.getType())) {
            throw die(where + " is a " + f.getType().getName() + ", not an " + Server.class.getName()
                    + ", so it cannot be bound to " + HOST);
        }
        try {
            f.setAccessible(true);
            Object server = f.get(proxy);
            if (server == null) {
                throw die(where + " is null");
            }
            return (Server) server;
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw die("reading " + where + ": " + e);
        }
    }

    // die prints why DynamoDB Local cannot start on 127.0.0.1 and exits with status 1. It
    // returns an error only so that callers can write `throw die(...)`.
    static Error die(String why) {
        System.err.println("DynamoDB Local (127.0.0.1 launcher): " + why);
        System.exit(1);
        return new AssertionError("unreachable");
    }
}
